//! A whole network's forward pass over a weights file: the layers of [`crate::cnn`] run one after another with
//! their parameters taken in order from one flat f32 array (per convolution or linear layer: weights, then one
//! bias per output; an inverted residual holds its expand (if any), depthwise and project convolutions in that
//! order). NICE-C's in-storage ops load this array from a weights file of the ext4 image.

use crate::cnn::{activate, conv2d, layer_cost, linear, max_pool, Act, ConvSpec, Layer, Shape};
use crate::error::{invalid, Result};

/// The networks NICE-C's op runs, by id: 0 LeNet-5 on (1, 28, 28), 1 MobileNetV2 on (3, 224, 224).
pub fn named(net: u8) -> Option<(Shape, Vec<Layer>)> {
    match net {
        0 => Some(crate::lenet::layers()),
        1 => Some(crate::cnn::mobilenet_v2()),
        _ => None,
    }
}

/// The convolutions an inverted residual is made of (expand only when t > 1).
fn ir_parts(c: usize, expand: usize, out: usize, stride: usize) -> Vec<(ConvSpec, Option<Act>)> {
    let hidden = c * expand.max(1);
    let mut v = Vec::new();
    if expand > 1 {
        v.push((ConvSpec { out: hidden, k: 1, stride: 1, pad: 0, groups: 1 }, Some(Act::Relu6)));
    }
    v.push((ConvSpec { out: hidden, k: 3, stride, pad: 1, groups: hidden }, Some(Act::Relu6)));
    v.push((ConvSpec { out, k: 1, stride: 1, pad: 0, groups: 1 }, None));
    v
}

/// One kernel of a network as a general-purpose processor (the host's GPU) runs it, per image: its multiply-adds
/// (0 for pools and activations), weights, and input and output elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelCost {
    pub macs: u64,
    pub weights: u64,
    pub inputs: u64,
    pub outputs: u64,
}

/// The network's kernels in order: one per convolution, linear, pool or activation layer; an inverted residual is
/// its two or three convolutions (activations fused), as a framework launches them.
pub fn kernels(input: Shape, layers: &[Layer]) -> Result<Vec<KernelCost>> {
    let elems = |s: Shape| (s.0 * s.1 * s.2) as u64;
    let mut out = Vec::new();
    let mut s = input;
    for l in layers {
        let parts = match *l {
            Layer::InvertedResidual { expand, out, stride } => ir_parts(s.0, expand, out, stride)
                .into_iter()
                .map(|(c, _)| Layer::Conv { out: c.out, k: c.k, stride: c.stride, pad: c.pad, groups: c.groups })
                .collect(),
            _ => vec![l.clone()],
        };
        for p in &parts {
            let (ns, macs, weights) = layer_cost(p, s)?;
            out.push(KernelCost { macs, weights, inputs: elems(s), outputs: elems(ns) });
            s = ns;
        }
    }
    Ok(out)
}

/// The parameterised layers (convolutions, an inverted residual's parts, linear layers) in file order: (weights,
/// biases) of each.
pub fn param_layers(input: Shape, layers: &[Layer]) -> Result<Vec<(usize, usize)>> {
    let mut s = input;
    let mut v = Vec::new();
    for l in layers {
        let (next, _, w) = layer_cost(l, s)?;
        match *l {
            Layer::InvertedResidual { expand, out, stride } => {
                let mut z = s;
                for (spec, _) in ir_parts(s.0, expand, out, stride) {
                    let p = Layer::Conv { out: spec.out, k: spec.k, stride: spec.stride, pad: spec.pad, groups: spec.groups };
                    let (nz, _, w) = layer_cost(&p, z)?;
                    v.push((w as usize, spec.out));
                    z = nz;
                }
            }
            Layer::Conv { out, .. } | Layer::Linear { out } => v.push((w as usize, out)),
            _ => {}
        }
        s = next;
    }
    Ok(v)
}

/// f32 parameters (weights and biases) of the network on `input`.
pub fn param_count(input: Shape, layers: &[Layer]) -> Result<usize> {
    Ok(param_layers(input, layers)?.iter().map(|(w, b)| w + b).sum())
}

/// A weights file's parameters (little-endian f32, exactly [`param_count`] of them, all finite).
pub fn parse_params(b: &[u8], input: Shape, layers: &[Layer]) -> Result<Vec<f32>> {
    let n = param_count(input, layers)?;
    if b.len() != 4 * n {
        return Err(invalid(format!("weights: {} bytes, the network needs {}", b.len(), 4 * n)));
    }
    let p: Vec<f32> = b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
    if p.iter().any(|v| !v.is_finite()) {
        return Err(invalid("weights: a value is not finite"));
    }
    Ok(p)
}

/// The arithmetic a forward pass runs in: one implementation per precision (f32 here, int8 in `quant.rs`). The
/// parameterised layers are taken in file order, one per `conv` / `linear` call.
pub(crate) trait Datapath {
    type Tensor: Clone;
    fn conv(&mut self, x: Self::Tensor, s: Shape, spec: ConvSpec) -> Result<(Self::Tensor, Shape)>;
    fn linear(&mut self, x: Self::Tensor, out: usize) -> Result<Self::Tensor>;
    fn act(&self, x: &mut Self::Tensor, a: Act);
    fn max_pool(&self, x: Self::Tensor, s: Shape, k: usize, stride: usize) -> Result<(Self::Tensor, Shape)>;
    fn global_avg_pool(&self, x: Self::Tensor, s: Shape) -> Self::Tensor;
    /// The tensor entering an inverted residual, as its first convolution and its residual add both read it.
    fn block_input(&self, x: Self::Tensor) -> Self::Tensor {
        x
    }
    /// `z + y`: the residual add of an inverted residual.
    fn residual(&self, z: Self::Tensor, y: &Self::Tensor) -> Self::Tensor;
}

/// Runs the network's layers over `x` (shape `input`) in the datapath's arithmetic.
pub(crate) fn run<D: Datapath>(dp: &mut D, input: Shape, layers: &[Layer], x: D::Tensor) -> Result<D::Tensor> {
    let (mut y, mut s) = (x, input);
    for l in layers {
        (y, s) = match *l {
            Layer::Conv { out, k, stride, pad, groups } => dp.conv(y, s, ConvSpec { out, k, stride, pad, groups })?,
            Layer::MaxPool { k, stride } => dp.max_pool(y, s, k, stride)?,
            Layer::GlobalAvgPool => (dp.global_avg_pool(y, s), (s.0, 1, 1)),
            Layer::Linear { out } => (dp.linear(y, out)?, (out, 1, 1)),
            Layer::Act(a) => {
                dp.act(&mut y, a);
                (y, s)
            }
            Layer::InvertedResidual { expand, out, stride } => {
                let y = dp.block_input(y);
                let (mut z, mut zs) = (y.clone(), s);
                for (spec, act) in ir_parts(s.0, expand, out, stride) {
                    (z, zs) = dp.conv(z, zs, spec)?;
                    if let Some(a) = act {
                        dp.act(&mut z, a);
                    }
                }
                if stride == 1 && s.0 == out {
                    z = dp.residual(z, &y);
                }
                (z, zs)
            }
        };
    }
    Ok(y)
}

/// The f32 datapath over a flat parameter array.
struct F32<'a> {
    params: &'a [f32],
    at: usize,
}

impl<'a> F32<'a> {
    /// Takes the next `n` parameters.
    fn take(&mut self, n: usize) -> Result<&'a [f32]> {
        let params: &'a [f32] = self.params;
        let s = params.get(self.at..self.at + n).ok_or_else(|| invalid("weights: fewer parameters than the network needs"))?;
        self.at += n;
        Ok(s)
    }
}

impl Datapath for F32<'_> {
    type Tensor = Vec<f32>;
    fn conv(&mut self, x: Vec<f32>, s: Shape, spec: ConvSpec) -> Result<(Vec<f32>, Shape)> {
        let wts = self.take((s.0 / spec.groups) * spec.k * spec.k * spec.out)?;
        let bias = self.take(spec.out)?;
        conv2d(&x, s, wts, bias, spec)
    }
    fn linear(&mut self, x: Vec<f32>, out: usize) -> Result<Vec<f32>> {
        let w = self.take(x.len() * out)?;
        let b = self.take(out)?;
        linear(&x, w, b)
    }
    fn act(&self, x: &mut Vec<f32>, a: Act) {
        activate(x, a);
    }
    fn max_pool(&self, x: Vec<f32>, s: Shape, k: usize, stride: usize) -> Result<(Vec<f32>, Shape)> {
        max_pool(&x, s, k, stride)
    }
    fn global_avg_pool(&self, x: Vec<f32>, s: Shape) -> Vec<f32> {
        let hw = (s.1 * s.2) as f32;
        x.chunks(s.1 * s.2).map(|c| c.iter().sum::<f32>() / hw).collect()
    }
    fn residual(&self, mut z: Vec<f32>, y: &Vec<f32>) -> Vec<f32> {
        for (a, b) in z.iter_mut().zip(y) {
            *a += b;
        }
        z
    }
}

/// The network's output (logits) for one input tensor `x` of shape `input`; `params` must hold exactly
/// [`param_count`] values.
pub fn forward(input: Shape, layers: &[Layer], params: &[f32], x: &[f32]) -> Result<Vec<f32>> {
    if params.len() != param_count(input, layers)? {
        return Err(invalid(format!("weights: {} parameters, the network has {}", params.len(), param_count(input, layers)?)));
    }
    if x.len() != input.0 * input.1 * input.2 {
        return Err(invalid("input length does not match its shape"));
    }
    run(&mut F32 { params, at: 0 }, input, layers, x.to_vec())
}

/// The arithmetic NICE-C's in-storage op computes in (`cnn_precision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// The FPGA's 8-bit datapath (`quant.rs`), what the timing charges.
    Int8,
    /// f32 throughout, for comparison.
    F32,
}

impl Precision {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "int8" => Ok(Precision::Int8),
            "f32" => Ok(Precision::F32),
            o => Err(invalid(format!("precision {o:?}: expected \"int8\" or \"f32\""))),
        }
    }
}

/// A named network (`named`) with its weights file parsed (and quantised for int8), classifying u8 images.
#[derive(Debug, Clone)]
pub struct Classifier {
    input: Shape,
    layers: Vec<Layer>,
    params: Vec<f32>,
    int8: Option<crate::quant::QuantNet>,
}

impl Classifier {
    /// Parses `weights` for network `net` in `precision`: the network's f32 parameters, then (required for int8,
    /// checked whenever present) the activation-scales section (`quant::ScalesSection`).
    pub fn new(net: u8, weights: &[u8], precision: Precision) -> Result<Self> {
        use crate::quant::{scales_needed, QuantNet, ScalesSection};
        let (input, layers) = named(net).ok_or_else(|| invalid(format!("network {net}: expected 0 (LeNet-5) or 1 (MobileNetV2)")))?;
        let n = 4 * param_count(input, &layers)?;
        let (p, section) = weights.split_at(n.min(weights.len()));
        let params = parse_params(p, input, &layers)?;
        let scales = match section {
            [] => None,
            s => Some(ScalesSection::parse(s, scales_needed(input, &layers)?)?),
        };
        let int8 = match (precision, scales) {
            (Precision::Int8, Some(s)) => Some(QuantNet::new(input, &layers, &params, &s)?),
            (Precision::Int8, None) => {
                let why = format!("weights: {n} bytes of f32 parameters and no activation-scales section after them: cnn_precision int8 needs one (NCQ1, calibrated by nearflash.nice.int8)");
                return Err(invalid(why));
            }
            (Precision::F32, _) => None,
        };
        Ok(Classifier { input, layers, params, int8 })
    }

    /// Bytes of one image (u8 in the network's CHW shape).
    pub fn frame(&self) -> usize {
        self.input.0 * self.input.1 * self.input.2
    }

    /// One image's logits and class (the first of equal largest: on int8, of equal int32 sums).
    pub fn run(&self, img: &[u8]) -> Result<(Vec<f64>, usize)> {
        if img.len() != self.frame() {
            return Err(invalid(format!("input: {} bytes, the network takes {}", img.len(), self.frame())));
        }
        Ok(match &self.int8 {
            Some(q) => {
                let out = q.forward(img)?;
                let best = out.v.iter().enumerate().fold(0, |b, (i, v)| if *v > out.v[b] { i } else { b });
                (out.real(), best)
            }
            None => {
                let x: Vec<f32> = img.iter().map(|&p| f32::from(p) / 255.0).collect();
                let logits = forward(self.input, &self.layers, &self.params, &x)?;
                let best = argmax(&logits);
                (logits.into_iter().map(f64::from).collect(), best)
            }
        })
    }
}

/// The index of the largest value (the first of equals).
pub fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cnn::mobilenet_v2;

    #[test]
    fn kernels_split_inverted_residuals_and_keep_the_network_totals() {
        let (shape, layers) = mobilenet_v2();
        let ks = kernels(shape, &layers).unwrap();
        let t = crate::cnn::network_timing(shape, &layers, 1, &crate::cnn::CnnParams::default()).unwrap();
        assert_eq!(ks.iter().map(|k| k.macs).sum::<u64>(), t.macs);
        assert_eq!(ks.iter().map(|k| k.weights).sum::<u64>(), t.weights);
        // 17 inverted residuals: the first (t = 1) has 2 convolutions, the other 16 have 3; plus the stem conv,
        // 2 activations, the 1x1 head conv, the pool and the classifier.
        assert_eq!(ks.len(), 2 + 16 * 3 + 6);
        assert_eq!(ks[0], KernelCost { macs: 32 * 112 * 112 * 27, weights: 32 * 27, inputs: 3 * 224 * 224, outputs: 32 * 112 * 112 });
        // Each kernel reads what the one before it wrote.
        assert!(ks.windows(2).all(|w| w[0].outputs == w[1].inputs));
    }

    #[test]
    fn parameter_counts_and_a_small_residual_network_by_hand() {
        let (shape, l) = mobilenet_v2();
        let n = param_count(shape, &l).unwrap();
        assert!((3.4e6..3.6e6).contains(&(n as f64)), "{n}");
        // One inverted residual with t = 1 on 2 channels: depthwise 3x3 (identity kernels) + pointwise identity
        // (+ residual) doubles the input.
        let layers = [Layer::InvertedResidual { expand: 1, out: 2, stride: 1 }];
        let mut p = Vec::new();
        for _ in 0..2 {
            p.extend([0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
        }
        p.extend([0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
        assert_eq!(p.len(), param_count((2, 2, 2), &layers).unwrap());
        let x = [0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 5.5, 0.25];
        let y = forward((2, 2, 2), &layers, &p, &x).unwrap();
        // ReLU6 after the depthwise clamps 0..6; the project is linear; the residual adds the input.
        assert_eq!(y, x.iter().map(|v| v + v.clamp(0.0, 6.0)).collect::<Vec<_>>());
        assert!(forward((2, 2, 2), &layers, &p[1..], &x).is_err());
        assert!(forward((2, 2, 2), &layers, &p, &x[1..]).is_err());
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
    }
}
