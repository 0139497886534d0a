//! A trained model: the layer list plus float weights, stored as one safetensors file whose metadata carries the
//! layer list (`network`, JSON) and how it was trained. `forward` is the float reference that the int8 executor is
//! checked against.

use crate::error::{CognitiveError, Result};
use crate::network::{Layer, Network, Shape};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::{BTreeMap, HashMap};

/// The model shipped with the project (trained by `nearflash cognitive train`, seed 1), inside the Python package
/// so that the wheel carries it.
pub fn shipped_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/nearflash/cognitive/fashion_hash48.safetensors")
}

/// Weights and bias of one weighted layer.
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
}

/// A network with float weights.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub network: Network,
    pub weights: HashMap<String, Weights>,
    /// Free-form training record (seed, epochs, accuracy, ...).
    pub metadata: BTreeMap<String, String>,
}

fn f32s(name: &str, t: &TensorView, shape: &[usize]) -> Result<Vec<f32>> {
    if t.dtype() != Dtype::F32 {
        return Err(CognitiveError::bad_file(name, format!("dtype {:?}; F32 expected", t.dtype())));
    }
    if t.shape() != shape {
        return Err(CognitiveError::bad_file(name, format!("shape {:?}; the layer list needs {shape:?}", t.shape())));
    }
    let v: Vec<f32> = t.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    if v.iter().any(|x| !x.is_finite()) {
        return Err(CognitiveError::bad_file(name, "holds a non-finite value"));
    }
    Ok(v)
}

impl Model {
    /// Parses a safetensors file (`source` names it in errors).
    pub fn from_safetensors(source: &str, bytes: &[u8]) -> Result<Model> {
        let bad = |why: String| CognitiveError::bad_file(source, why);
        let (_, meta) = SafeTensors::read_metadata(bytes).map_err(|e| bad(format!("not a safetensors file: {e}")))?;
        let metadata: BTreeMap<String, String> = meta.metadata().clone().unwrap_or_default().into_iter().collect();
        let net_json = metadata.get("network").ok_or_else(|| bad("metadata has no \"network\" layer list".into()))?;
        let network: Network = serde_json::from_str(net_json).map_err(|e| bad(format!("bad layer list: {e}")))?;
        network.shapes()?;
        let st = SafeTensors::deserialize(bytes).map_err(|e| bad(format!("not a safetensors file: {e}")))?;
        let mut weights = HashMap::new();
        for l in network.weighted() {
            let (wshape, blen) = l.weight_shape().unwrap();
            let name = l.label();
            let get = |suffix: &str| {
                let key = format!("{name}.{suffix}");
                st.tensor(&key).map_err(|_| bad(format!("tensor {key:?} missing")))
            };
            let weight = f32s(&format!("{source}: {name}.weight"), &get("weight")?, &wshape)?;
            let bias = f32s(&format!("{source}: {name}.bias"), &get("bias")?, &[blen])?;
            weights.insert(name, Weights { weight, bias });
        }
        Ok(Model { network, weights, metadata })
    }

    /// Reads a model file.
    pub fn load(path: &std::path::Path) -> Result<Model> {
        let bytes = std::fs::read(path).map_err(|e| CognitiveError::Io { path: path.display().to_string(), source: e })?;
        Model::from_safetensors(&path.display().to_string(), &bytes)
    }

    /// The model shipped with the project (read from the source tree).
    pub fn shipped() -> Result<Model> {
        Model::load(&shipped_path())
    }

    /// Serialises to safetensors (the layer list and `metadata` in the header).
    pub fn to_safetensors(&self) -> Vec<u8> {
        let mut meta: HashMap<String, String> = self.metadata.clone().into_iter().collect();
        meta.insert("network".into(), serde_json::to_string(&self.network).expect("serialisable"));
        let mut bufs: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
        for l in self.network.weighted() {
            let (wshape, blen) = l.weight_shape().unwrap();
            let w = &self.weights[&l.label()];
            let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
            bufs.push((format!("{}.weight", l.label()), wshape, bytes(&w.weight)));
            bufs.push((format!("{}.bias", l.label()), vec![blen], bytes(&w.bias)));
        }
        let views: Vec<(String, TensorView)> = bufs
            .iter()
            .map(|(n, s, b)| (n.clone(), TensorView::new(Dtype::F32, s.clone(), b).expect("consistent")))
            .collect();
        safetensors::serialize(views, &Some(meta)).expect("serialisable")
    }

    /// A model with seeded uniform random weights (He-style range), for timing-only networks.
    pub fn random(network: Network, seed: u64) -> Result<Model> {
        use rand::{Rng, SeedableRng};
        network.shapes()?;
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut weights = HashMap::new();
        for l in network.weighted() {
            let (wshape, blen) = l.weight_shape().unwrap();
            let fan_in: usize = wshape[1..].iter().product();
            let r = (6.0 / fan_in as f32).sqrt();
            let weight = (0..wshape.iter().product::<usize>()).map(|_| rng.gen_range(-r..r)).collect();
            weights.insert(l.label(), Weights { weight, bias: vec![0.0; blen] });
        }
        Ok(Model { network, weights, metadata: BTreeMap::new() })
    }

    /// Float forward pass of one image (pixels 0..=255, CHW): the hash layer's pre-activation.
    pub fn forward(&self, image: &[u8]) -> Result<Vec<f32>> {
        let want: usize = self.network.input.iter().product();
        if image.len() != want {
            return Err(CognitiveError::invalid("image", format!("{} bytes; the model takes {want}", image.len())));
        }
        let mut x: Vec<f32> = image.iter().map(|&p| p as f32 / 255.0).collect();
        let mut s = self.network.input;
        for l in &self.network.body {
            let o = l.out_shape(s)?;
            x = self.apply(l, &x, s, o);
            s = o;
        }
        Ok(x)
    }

    /// Class scores (logits) of the classifier on the hash layer's sigmoid.
    pub fn classify(&self, image: &[u8]) -> Result<Vec<f32>> {
        let Some(c) = &self.network.classifier else {
            return Err(CognitiveError::invalid("model", "has no classifier"));
        };
        let h: Vec<f32> = self.forward(image)?.iter().map(|a| 1.0 / (1.0 + (-a).exp())).collect();
        Ok(self.apply(c, &h, [h.len(), 1, 1], c.out_shape([h.len(), 1, 1])?))
    }

    /// One float layer.
    pub(crate) fn apply(&self, l: &Layer, x: &[f32], s: Shape, o: Shape) -> Vec<f32> {
        match l {
            Layer::Conv { kernel, stride, pad, .. } => {
                let w = &self.weights[&l.label()];
                conv2d(x, s, &w.weight, &w.bias, o, *kernel, *stride, *pad, 0.0f32, |a, b| a + b, |x, w| x * w)
            }
            Layer::MaxPool { size, stride } => max_pool(x, s, o, *size, *stride),
            Layer::Relu => x.iter().map(|v| v.max(0.0)).collect(),
            Layer::Flatten => x.to_vec(),
            Layer::Fc { inputs, .. } => {
                let w = &self.weights[&l.label()];
                w.bias
                    .iter()
                    .enumerate()
                    .map(|(j, b)| b + w.weight[j * inputs..(j + 1) * inputs].iter().zip(x).map(|(a, b)| a * b).sum::<f32>())
                    .collect()
            }
        }
    }
}

/// Direct convolution over CHW, generic over the element (float reference and int8 executor share it).
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d<X: Copy, W: Copy, A: Copy>(
    x: &[X],
    s: Shape,
    w: &[W],
    bias: &[A],
    o: Shape,
    k: usize,
    stride: usize,
    pad: usize,
    _zero: A,
    add: impl Fn(A, A) -> A,
    mul: impl Fn(X, W) -> A,
) -> Vec<A> {
    let (ic, ih, iw) = (s[0], s[1] as isize, s[2] as isize);
    let mut out = Vec::with_capacity(o[0] * o[1] * o[2]);
    for oc in 0..o[0] {
        for oy in 0..o[1] {
            for ox in 0..o[2] {
                let mut acc = bias[oc];
                for c in 0..ic {
                    for ky in 0..k {
                        let y = (oy * stride + ky) as isize - pad as isize;
                        if y < 0 || y >= ih {
                            continue;
                        }
                        for kx in 0..k {
                            let xx = (ox * stride + kx) as isize - pad as isize;
                            if xx < 0 || xx >= iw {
                                continue;
                            }
                            let xi = (c * ih as usize + y as usize) * iw as usize + xx as usize;
                            acc = add(acc, mul(x[xi], w[((oc * ic + c) * k + ky) * k + kx]));
                        }
                    }
                }
                out.push(acc);
            }
        }
    }
    out
}

/// Max pooling over CHW.
pub(crate) fn max_pool<T: Copy + PartialOrd>(x: &[T], s: Shape, o: Shape, size: usize, stride: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(o[0] * o[1] * o[2]);
    for c in 0..o[0] {
        for oy in 0..o[1] {
            for ox in 0..o[2] {
                let mut m = x[(c * s[1] + oy * stride) * s[2] + ox * stride];
                for ky in 0..size {
                    for kx in 0..size {
                        let v = x[(c * s[1] + oy * stride + ky) * s[2] + ox * stride + kx];
                        if v > m {
                            m = v;
                        }
                    }
                }
                out.push(m);
            }
        }
    }
    out
}

/// Packs a pre-activation into a hash code: bit i = `a[i] >= 0` (sigmoid >= 0.5), bit 0 the first unit.
pub fn pack_code(pre: &[f32]) -> u64 {
    pre.iter().enumerate().filter(|(_, &a)| a >= 0.0).fold(0u64, |c, (i, _)| c | (1 << i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::fashion_hash_cnn;

    #[test]
    fn safetensors_roundtrip_and_damage() {
        let m = Model::random(fashion_hash_cnn(16), 3).unwrap();
        let bytes = m.to_safetensors();
        let back = Model::from_safetensors("t", &bytes).unwrap();
        assert_eq!(back.network, m.network);
        assert_eq!(back.weights, m.weights);
        assert!(Model::from_safetensors("t", &bytes[..bytes.len() - 5]).is_err());
        assert!(Model::from_safetensors("t", b"garbage").is_err());
        // a layer list whose shapes disagree with the tensors: 16-bit tensors under a 32-bit layer list
        let mut meta = std::collections::HashMap::new();
        meta.insert("network".to_string(), serde_json::to_string(&fashion_hash_cnn(32)).unwrap());
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let e = Model::from_safetensors("t", &safetensors::serialize(st.tensors(), &Some(meta)).unwrap()).unwrap_err();
        assert!(e.to_string().contains("hash.weight"), "{e}");
    }

    #[test]
    fn forward_rejects_wrong_size() {
        let m = Model::random(fashion_hash_cnn(16), 3).unwrap();
        assert!(m.forward(&[0; 10]).is_err());
        assert_eq!(m.forward(&[9; 784]).unwrap().len(), 16);
        assert_eq!(m.classify(&[9; 784]).unwrap().len(), 10);
    }

    #[test]
    fn pack_code_bits() {
        assert_eq!(pack_code(&[1.0, -1.0, 0.0]), 0b101);
    }
}
