//! DLG-x's 8-bit fixed point: symmetric int8 weights with one scale per layer, int8 activations with one scale per
//! tensor calibrated on data (the largest magnitude seen), int32 accumulation with int32 biases, and requantisation
//! by a fixed-point multiplier and shift (no floating point on the device). The hash layer's code is taken from its
//! int32 accumulator's sign, as the float model's `sigmoid(a) >= 0.5`.

use crate::error::{CognitiveError, Result};
use crate::model::{conv2d, max_pool, Model};
use crate::network::{Layer, Network, Shape};

/// A weighted layer in int8.
#[derive(Debug, Clone, PartialEq)]
pub struct QWeights {
    pub weight: Vec<i8>,
    pub bias: Vec<i32>,
    /// Weight scale: real = q * scale.
    pub w_scale: f32,
    /// Scale of the layer's int8 input.
    pub in_scale: f32,
    /// Scale of the layer's int8 output.
    pub out_scale: f32,
    /// Requantisation `in_scale * w_scale / out_scale` as `mult * 2^-shift` (mult in [2^30, 2^31)).
    pub mult: i32,
    pub shift: u32,
}

/// An int8 model: the network plus int8 weights for its weighted body layers, in body order.
#[derive(Debug, Clone, PartialEq)]
pub struct QModel {
    pub network: Network,
    /// Scale of the int8 input image (pixel/255 = q * input_scale).
    pub input_scale: f32,
    pub layers: Vec<QWeights>,
}

fn scale_of(max_abs: f32) -> f32 {
    if max_abs > 0.0 {
        max_abs / 127.0
    } else {
        1.0
    }
}

/// `m` (positive) as `mult * 2^-shift` with a 31-bit mantissa.
pub fn fixed_point(m: f64) -> Result<(i32, u32)> {
    if !(m.is_finite() && m > 0.0 && m < 1.0) {
        return Err(CognitiveError::invalid("requantisation multiplier", format!("{m} outside (0, 1)")));
    }
    let mut shift = 31u32;
    let mut x = m;
    while x < 0.5 {
        x *= 2.0;
        shift += 1;
    }
    if shift > 62 {
        return Err(CognitiveError::invalid("requantisation multiplier", format!("{m} too small for int32")));
    }
    let mult = (x * (1u64 << 31) as f64).round().min(i32::MAX as f64) as i32;
    Ok((mult, shift))
}

/// `round(acc * mult * 2^-shift)` saturated to int8.
fn requant(acc: i32, mult: i32, shift: u32) -> i8 {
    let p = acc as i64 * mult as i64;
    let r = (p + (1i64 << (shift - 1))) >> shift;
    r.clamp(-127, 127) as i8
}

impl QModel {
    /// Quantises `model`, calibrating activation scales on `calibration` images (at least one).
    pub fn quantise(model: &Model, calibration: &[&[u8]]) -> Result<QModel> {
        if calibration.is_empty() {
            return Err(CognitiveError::invalid("calibration", "needs at least one image"));
        }
        let net = &model.network;
        let shapes = net.shapes()?;
        // largest magnitude at the output of each body layer, over the calibration set
        let mut max_out = vec![0f32; net.body.len()];
        for img in calibration {
            let mut x: Vec<f32> = {
                let want: usize = net.input.iter().product();
                if img.len() != want {
                    return Err(CognitiveError::invalid("calibration", format!("image of {} bytes; {want} expected", img.len())));
                }
                img.iter().map(|&p| p as f32 / 255.0).collect()
            };
            for (i, l) in net.body.iter().enumerate() {
                x = model.apply(l, &x, shapes[i], shapes[i + 1]);
                let m = x.iter().fold(0f32, |a, v| a.max(v.abs()));
                max_out[i] = max_out[i].max(m);
            }
        }
        let input_scale = 1.0 / 127.0;
        let mut cur_scale = input_scale;
        let mut layers = Vec::new();
        for (i, l) in net.body.iter().enumerate() {
            if l.weight_shape().is_none() {
                continue; // relu, pool and flatten keep the scale
            }
            let w = &model.weights[&l.label()];
            let w_scale = scale_of(w.weight.iter().fold(0f32, |a, v| a.max(v.abs())));
            let out_scale = scale_of(max_out[i]);
            let weight = w.weight.iter().map(|v| (v / w_scale).round().clamp(-127.0, 127.0) as i8).collect();
            let acc_scale = cur_scale as f64 * w_scale as f64;
            let bias = w.bias.iter().map(|b| (*b as f64 / acc_scale).round().clamp(i32::MIN as f64, i32::MAX as f64) as i32).collect();
            let (mult, shift) = fixed_point(acc_scale / out_scale as f64).map_err(|e| CognitiveError::Unsupported {
                layer: l.label(),
                why: format!("cannot requantise: {e}"),
            })?;
            layers.push(QWeights { weight, bias, w_scale, in_scale: cur_scale, out_scale, mult, shift });
            cur_scale = out_scale;
        }
        Ok(QModel { network: net.clone(), input_scale, layers })
    }

    /// Runs one image (pixels 0..=255) in int8. Returns the hash layer's int32 accumulators and their real values.
    pub fn forward(&self, image: &[u8]) -> Result<(Vec<i32>, Vec<f32>)> {
        let want: usize = self.network.input.iter().product();
        if image.len() != want {
            return Err(CognitiveError::invalid("image", format!("{} bytes; the model takes {want}", image.len())));
        }
        // pixel/255 quantised at scale 1/127: q = round(p * 127 / 255)
        let mut x: Vec<i8> = image.iter().map(|&p| ((p as u32 * 127 + 127) / 255) as i8).collect();
        let mut s: Shape = self.network.input;
        let mut q = self.layers.iter();
        let last = self.network.body.len() - 1;
        for (i, l) in self.network.body.iter().enumerate() {
            let o = l.out_shape(s)?;
            let acc = match l {
                Layer::Conv { kernel, stride, pad, .. } => {
                    let w = q.next().expect("one QWeights per weighted layer");
                    (w, conv2d(&x, s, &w.weight, &w.bias, o, *kernel, *stride, *pad, 0i32, |a, b| a + b, |x, w| x as i32 * w as i32))
                }
                Layer::Fc { inputs, .. } => {
                    let w = q.next().expect("one QWeights per weighted layer");
                    (w, fc_i8(&x, &w.weight, &w.bias, *inputs))
                }
                Layer::MaxPool { size, stride } => {
                    x = max_pool(&x, s, o, *size, *stride);
                    s = o;
                    continue;
                }
                Layer::Relu => {
                    x.iter_mut().for_each(|v| *v = (*v).max(0));
                    continue;
                }
                Layer::Flatten => {
                    s = o;
                    continue;
                }
            };
            let (w, acc) = acc;
            if i == last {
                let sc = w.in_scale * w.w_scale;
                let real = acc.iter().map(|&a| a as f32 * sc).collect();
                return Ok((acc, real));
            }
            x = acc.iter().map(|&a| requant(a, w.mult, w.shift)).collect();
            s = o;
        }
        Err(CognitiveError::Unsupported { layer: "body".into(), why: "must end with the fc hash layer".into() })
    }

    /// Hash code of one image: bit i = accumulator i >= 0.
    pub fn hash(&self, image: &[u8]) -> Result<u64> {
        let (acc, _) = self.forward(image)?;
        Ok(acc.iter().enumerate().filter(|(_, &a)| a >= 0).fold(0u64, |c, (i, _)| c | (1 << i)))
    }
}

fn fc_i8(x: &[i8], w: &[i8], bias: &[i32], inputs: usize) -> Vec<i32> {
    bias.iter()
        .enumerate()
        .map(|(j, b)| b + w[j * inputs..(j + 1) * inputs].iter().zip(x).map(|(&a, &b)| a as i32 * b as i32).sum::<i32>())
        .collect()
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_matches_float() {
        for m in [0.9, 0.5, 0.123, 1e-3, 3.7e-6] {
            let (mult, shift) = fixed_point(m).unwrap();
            let back = mult as f64 / 2f64.powi(shift as i32);
            assert!((back - m).abs() / m < 1e-8, "{m} -> {back}");
            for acc in [-100_000i32, -1, 0, 7, 123_456] {
                let want = (acc as f64 * m).round().clamp(-127.0, 127.0);
                assert!((requant(acc, mult, shift) as f64 - want).abs() <= 1.0);
            }
        }
        assert!(fixed_point(0.0).is_err());
        assert!(fixed_point(1.5).is_err());
        assert!(fixed_point(f64::NAN).is_err());
    }

    #[test]
    fn rejects_bad_inputs() {
        let m = Model::random(crate::network::fashion_hash_cnn(16), 1).unwrap();
        assert!(QModel::quantise(&m, &[]).is_err());
        assert!(QModel::quantise(&m, &[&[0u8; 5]]).is_err());
        let q = QModel::quantise(&m, &[&[100u8; 784]]).unwrap();
        assert!(q.forward(&[0; 783]).is_err());
        assert_eq!(q.forward(&[3; 784]).unwrap().0.len(), 16);
    }
}
