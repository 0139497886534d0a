//! NICE-C's 8-bit datapath, as the FPGA's PE array computes it (the timing, `cnn::network_timing`, charges 8-bit
//! elements): int8 weights with one symmetric scale per layer, 8-bit activations with one scale per tensor, int32
//! sums in the adder tree, and requantisation to int8 before the next convolution or linear layer.
//!
//! Where the scales come from (no calibration step, nothing stored beside the weights):
//! * **Weights**: the firmware quantises the f32 weights file it reads, per layer: scale = max |w| / 127,
//!   w_q = round(w / scale) (half away from zero, in f64), so the file format is unchanged.
//! * **Activations**: dynamic per-tensor scaling, per image. The input is the image's u8 pixels (scale 1/255). A
//!   layer's int32 sums (scale s_x * s_w) pass its ReLU / ReLU6 and max pool as int32; before the next convolution
//!   or linear layer the tensor is requantised by its own largest magnitude m: M = floor(127 * 2^31 / m), q =
//!   sign(v) * ((|v| * M + 2^30) >> 31) (|q| <= 127), scale = s * 2^31 / M. The hardware this needs: a max-|x|
//!   tracker on the output stream (one comparator per lane), the layer's int32 output held until its maximum is
//!   known, one 32-bit divider per tensor for M, and a multiply-shift per lane on the way into the next layer.
//! * Biases are quantised per image to the sums' grid: round(b / (s_x * s_w)), saturated to int32. ReLU6's 6 is
//!   floor(6 / s) on that grid. A global average pool keeps the int32 sums (scale / (h x w)). A residual add
//!   rescales the block input to the sum's grid: z + round(y * (s_y / s_z)).
//!
//! Every step is integer or a double-precision operation on scales in a fixed order, so the numpy reference
//! (`nearflash.nice.int8`) reproduces it bit for bit.

use crate::cnn::{conv2d, linear, max_pool, Act, ConvSpec, Layer, Shape};
use crate::cnn_net::{param_layers, run, Datapath};
use crate::error::{invalid, Result};

/// Largest int8 magnitude (symmetric range -127..=127).
pub const QMAX: i64 = 127;
/// Fraction bits of the requantisation multiplier.
const SHIFT: u32 = 31;

/// Rounds half away from zero (the same formula as the numpy reference).
pub fn round_half_away(x: f64) -> f64 {
    (x.abs() + 0.5).floor().copysign(x)
}

/// Saturates to the int32 range of the adder tree (never reached by LeNet-5 or MobileNetV2: |sum| <= K x 127 x
/// 255 + |bias|).
fn sat32(v: i64) -> i64 {
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX))
}

/// An f64 rounded and saturated into int32.
fn to_int32(x: f64) -> i64 {
    round_half_away(x).clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i64
}

/// Symmetric int8 quantisation of one layer's weights: (values in -127..=127, scale = max |w| / 127; 1 for all
/// zeros).
pub fn quantise_weights(w: &[f32]) -> (Vec<i64>, f64) {
    let m = w.iter().fold(0f64, |m, &v| m.max(f64::from(v).abs()));
    let scale = if m > 0.0 { m / QMAX as f64 } else { 1.0 };
    (w.iter().map(|&v| round_half_away(f64::from(v) / scale).clamp(-(QMAX as f64), QMAX as f64) as i64).collect(), scale)
}

/// A tensor on the 8-bit datapath: integer values and their scale (real = value x scale); `narrow` when the
/// values are 8-bit (the input's u8 or a requantised int8), else int32 sums.
#[derive(Debug, Clone, PartialEq)]
pub struct QTensor {
    pub v: Vec<i64>,
    pub scale: f64,
    pub narrow: bool,
}

impl QTensor {
    /// An image's u8 pixels, scale 1/255.
    pub fn image(img: &[u8]) -> Self {
        QTensor { v: img.iter().map(|&p| i64::from(p)).collect(), scale: 1.0 / 255.0, narrow: true }
    }

    /// Requantises int32 sums to int8 by the tensor's own largest magnitude (dynamic per-tensor scaling); an 8-bit
    /// tensor is returned as it is.
    pub fn requantise(self) -> Self {
        if self.narrow {
            return self;
        }
        let m = self.v.iter().map(|v| v.abs()).max().unwrap_or(0);
        if m == 0 {
            return QTensor { narrow: true, ..self };
        }
        // m <= 2^31 (saturated sums), so M >= 63 and |v| x M <= 127 x 2^31: no overflow, |q| <= 127.
        let mult = (QMAX << SHIFT) / m;
        let half = 1i64 << (SHIFT - 1);
        let v = self.v.iter().map(|&x| ((x.abs() * mult + half) >> SHIFT) * x.signum()).collect();
        QTensor { v, scale: self.scale * ((1i64 << SHIFT) as f64 / mult as f64), narrow: true }
    }

    /// The real values (value x scale).
    pub fn real(&self) -> Vec<f64> {
        self.v.iter().map(|&x| x as f64 * self.scale).collect()
    }
}

/// One convolution's or linear layer's quantised weights and its f32 biases.
#[derive(Debug, Clone)]
struct QLayer {
    w: Vec<i64>,
    scale: f64,
    bias: Vec<f64>,
}

/// A network with its weights quantised for the 8-bit datapath.
#[derive(Debug, Clone)]
pub struct QuantNet {
    input: Shape,
    layers: Vec<Layer>,
    q: Vec<QLayer>,
}

impl QuantNet {
    /// Quantises `params` (exactly `cnn_net::param_count` f32 values, in file order) layer by layer.
    pub fn new(input: Shape, layers: &[Layer], params: &[f32]) -> Result<Self> {
        let shapes = param_layers(input, layers)?;
        if params.len() != shapes.iter().map(|(w, b)| w + b).sum::<usize>() {
            return Err(invalid(format!("weights: {} parameters, the network has {}", params.len(), shapes.iter().map(|(w, b)| w + b).sum::<usize>())));
        }
        let mut at = 0;
        let q = shapes
            .iter()
            .map(|&(nw, nb)| {
                let (w, scale) = quantise_weights(&params[at..at + nw]);
                let bias = params[at + nw..at + nw + nb].iter().map(|&b| f64::from(b)).collect();
                at += nw + nb;
                QLayer { w, scale, bias }
            })
            .collect();
        Ok(QuantNet { input, layers: layers.to_vec(), q })
    }

    /// The last layer's int32 sums and their scale for one image (u8 pixels in the input's CHW shape).
    pub fn forward(&self, img: &[u8]) -> Result<QTensor> {
        if img.len() != self.input.0 * self.input.1 * self.input.2 {
            return Err(invalid(format!("input: {} bytes, the network takes {}", img.len(), self.input.0 * self.input.1 * self.input.2)));
        }
        run(&mut Int8 { q: &self.q, at: 0 }, self.input, &self.layers, QTensor::image(img))
    }
}

/// The 8-bit datapath over a network's quantised layers (taken in file order).
struct Int8<'a> {
    q: &'a [QLayer],
    at: usize,
}

impl<'a> Int8<'a> {
    fn next(&mut self) -> Result<&'a QLayer> {
        let q: &'a [QLayer] = self.q;
        let l = q.get(self.at).ok_or_else(|| invalid("weights: fewer layers than the network needs"))?;
        self.at += 1;
        Ok(l)
    }

    /// The layer's biases on the grid of its int32 sums for an input of scale `s`.
    fn bias(l: &QLayer, s: f64) -> Vec<i64> {
        let grid = s * l.scale;
        l.bias.iter().map(|&b| to_int32(b / grid)).collect()
    }
}

impl Datapath for Int8<'_> {
    type Tensor = QTensor;
    fn conv(&mut self, x: QTensor, s: Shape, spec: ConvSpec) -> Result<(QTensor, Shape)> {
        let x = x.requantise();
        let l = self.next()?;
        let (y, ns) = conv2d(&x.v, s, &l.w, &Self::bias(l, x.scale), spec)?;
        Ok((QTensor { v: y.into_iter().map(sat32).collect(), scale: x.scale * l.scale, narrow: false }, ns))
    }
    fn linear(&mut self, x: QTensor, _out: usize) -> Result<QTensor> {
        let x = x.requantise();
        let l = self.next()?;
        let y = linear(&x.v, &l.w, &Self::bias(l, x.scale))?;
        Ok(QTensor { v: y.into_iter().map(sat32).collect(), scale: x.scale * l.scale, narrow: false })
    }
    fn act(&self, x: &mut QTensor, a: Act) {
        let hi = match a {
            Act::Relu => i64::MAX,
            Act::Relu6 => (6.0 / x.scale).floor().min(i64::MAX as f64) as i64,
        };
        for v in &mut x.v {
            *v = (*v).clamp(0, hi);
        }
    }
    fn max_pool(&self, x: QTensor, s: Shape, k: usize, stride: usize) -> Result<(QTensor, Shape)> {
        let (v, ns) = max_pool(&x.v, s, k, stride)?;
        Ok((QTensor { v, ..x }, ns))
    }
    fn global_avg_pool(&self, x: QTensor, s: Shape) -> QTensor {
        let hw = s.1 * s.2;
        QTensor { v: x.v.chunks(hw).map(|c| sat32(c.iter().sum())).collect(), scale: x.scale / hw as f64, narrow: false }
    }
    fn block_input(&self, x: QTensor) -> QTensor {
        x.requantise()
    }
    fn residual(&self, z: QTensor, y: &QTensor) -> QTensor {
        let r = y.scale / z.scale;
        let v = z.v.iter().zip(&y.v).map(|(&a, &b)| sat32(a + to_int32(b as f64 * r))).collect();
        QTensor { v, ..z }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cnn_net::{forward, param_count};

    #[test]
    fn weights_quantise_symmetrically_and_requantisation_keeps_the_largest_value() {
        let (q, s) = quantise_weights(&[0.5, -1.0, 0.25, 0.0]);
        assert_eq!((q, s), (vec![64, -127, 32, 0], 1.0 / 127.0));
        assert_eq!(quantise_weights(&[0.0, 0.0]), (vec![0, 0], 1.0));
        let t = QTensor { v: vec![1000, -500, 3, 0], scale: 0.01, narrow: false }.requantise();
        // -500 x 127 / 1000 = -63.5, but M = floor(127 x 2^31 / 1000) sits just below the exact ratio: -63.
        assert_eq!(t.v, vec![127, -63, 0, 0]);
        assert!(t.narrow && (t.scale - 10.0 / 127.0).abs() < 1e-9, "{}", t.scale);
        assert_eq!(round_half_away(-2.5), -3.0);
        assert_eq!(round_half_away(2.4999), 2.0);
    }

    #[test]
    fn a_small_network_in_int8_is_near_its_float_output() {
        // conv 3x3 (2 -> 4) + ReLU, max pool, linear 4*3*3 -> 3: int8 within a few percent of f32.
        let input = (2, 8, 8);
        let layers = [
            Layer::Conv { out: 4, k: 3, stride: 1, pad: 1, groups: 1 },
            Layer::Act(Act::Relu),
            Layer::MaxPool { k: 2, stride: 2 },
            Layer::Conv { out: 4, k: 3, stride: 1, pad: 0, groups: 4 },
            Layer::Act(Act::Relu6),
            Layer::Linear { out: 3 },
        ];
        let n = param_count(input, &layers).unwrap();
        let params: Vec<f32> = (0..n).map(|i| ((i * 37 % 101) as f32 / 50.0 - 1.0) * 0.5).collect();
        let img: Vec<u8> = (0..128).map(|i| (i * 53 % 256) as u8).collect();
        let x: Vec<f32> = img.iter().map(|&p| f32::from(p) / 255.0).collect();
        let float = forward(input, &layers, &params, &x).unwrap();
        let q = QuantNet::new(input, &layers, &params).unwrap().forward(&img).unwrap();
        let real = q.real();
        let norm = float.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>().sqrt();
        let err = float.iter().zip(&real).map(|(a, b)| (f64::from(*a) - b).powi(2)).sum::<f64>().sqrt();
        assert!(err < 0.05 * norm, "int8 {real:?} vs f32 {float:?}");
        assert!(QuantNet::new(input, &layers, &params[1..]).is_err());
        assert!(QuantNet::new(input, &layers, &params).unwrap().forward(&img[1..]).is_err());
    }
}
