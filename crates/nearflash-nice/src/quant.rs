//! NICE-C's 8-bit datapath, as the FPGA's PE array computes it (the timing, `cnn::network_timing`, charges 8-bit
//! weights and activations): int8 weights with one symmetric scale per layer, int8 activations with one scale per
//! tensor, int32 sums in the adder tree, and requantisation of every sum to int8 on the way out of the PE array
//! (a fixed-point multiply and shift), so activations stay 8-bit from layer to layer.
//!
//! Where the scales come from:
//! * **Weights**: the firmware quantises the f32 weights file it reads, per layer: scale = max |w| / 127,
//!   w_q = round(w / scale) (half away from zero, in f64). The f32 file format is unchanged.
//! * **Activations**: calibrated on data by the host before deployment (`nearflash.nice.int8`: the float model over
//!   calibration images, scale = the largest magnitude of each layer's output after its activation and residual
//!   add, / 127), stored as a small versioned, checksummed section appended to the weights file (`ScalesSection`):
//!   one scale per convolution or linear layer except the last (whose int32 sums are the logits). The input is the
//!   image's u8 pixels (scale 1/255).
//! * Per layer: bias_q = round(b / (s_x s_w)) (saturated to int32) starts the sum; the sum is requantised by
//!   M = s_x s_w / s_y as mult x 2^-shift (`fixed_point`): q = clamp((sum x mult + 2^(shift-1)) >> shift, -127,
//!   127). ReLU clamps at 0, ReLU6 at floor(6 / s_y); max pool compares int8; the global average pool rounds the
//!   int32 sum / (h x w) (half up) and keeps the scale; a residual add rescales the block input to the block
//!   output's scale the same way and saturates.
//!
//! Every step is integer or a double-precision operation on scales in a fixed order, so the numpy reference
//! (`nearflash.nice.int8`) reproduces it bit for bit.

use crate::cnn::{conv2d, linear, max_pool, Act, ConvSpec, Layer, Shape};
use crate::cnn_net::{param_layers, run, Datapath};
use crate::error::{invalid, Result};

/// Largest int8 magnitude (symmetric range -127..=127).
pub const QMAX: i64 = 127;

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

/// A positive real multiplier as `mult x 2^-shift` (mult in [2^30, 2^31), shift in 1..=62): m = f x 2^e with f in
/// [0.5, 1), mult = round(f x 2^31), shift = 31 - e. Below 2^-31 it is 0 (every output rounds to 0); from 2^29 on
/// it saturates (i32::MAX x 2^-1: every non-zero output saturates).
pub fn fixed_point(m: f64) -> (i64, u32) {
    if m.is_nan() || m < 2f64.powi(-31) {
        return (0, 1);
    }
    if m >= 2f64.powi(29) {
        return (i64::from(i32::MAX), 1);
    }
    let mut e = ((m.to_bits() >> 52) & 0x7ff) as i32 - 1022;
    let mut mult = round_half_away(m * 2f64.powi(31 - e)) as i64;
    if mult == 1 << 31 {
        mult = 1 << 30;
        e += 1;
    }
    (mult, (31 - e) as u32)
}

/// Requantises int32 sums by `mult x 2^-shift` to int8 (round half up, saturating).
fn requantise(v: &[i64], (mult, shift): (i64, u32)) -> Vec<i64> {
    let half = 1i64 << (shift - 1);
    v.iter().map(|&x| ((x * mult + half) >> shift).clamp(-QMAX, QMAX)).collect()
}

/// The activation-scales section appended to a weights file for the 8-bit datapath: magic `NCQ1`, version u16 (1),
/// count u16, count x f32 scales (finite, > 0), CRC-32 (IEEE) of everything before it; little-endian.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalesSection(pub Vec<f32>);

impl ScalesSection {
    pub const MAGIC: &'static [u8; 4] = b"NCQ1";
    pub const VERSION: u16 = 1;

    /// Bytes of a section holding `n` scales.
    pub fn len_for(n: usize) -> usize {
        12 + 4 * n
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Self::MAGIC.to_vec();
        b.extend_from_slice(&Self::VERSION.to_le_bytes());
        b.extend_from_slice(&(self.0.len() as u16).to_le_bytes());
        for s in &self.0 {
            b.extend_from_slice(&s.to_le_bytes());
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses a section that must hold exactly `n` scales; damage is refused, naming what is wrong.
    pub fn parse(b: &[u8], n: usize) -> Result<Self> {
        if b.len() < 12 || &b[..4] != Self::MAGIC {
            return Err(invalid(format!("activation scales: {} bytes after the weights, not an NCQ1 section", b.len())));
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        let count = usize::from(u16::from_le_bytes([b[6], b[7]]));
        if version != Self::VERSION {
            return Err(invalid(format!("activation scales: version {version}, expected {}", Self::VERSION)));
        }
        if count != n || b.len() != Self::len_for(count) {
            return Err(invalid(format!("activation scales: {count} scales in {} bytes, the network needs {n} in {}", b.len(), Self::len_for(n))));
        }
        let (body, crc) = b.split_at(b.len() - 4);
        if crc32fast::hash(body).to_le_bytes() != crc {
            return Err(invalid("activation scales: checksum mismatch"));
        }
        let v: Vec<f32> = body[8..].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
        if let Some(i) = v.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(invalid(format!("activation scales: scale {i} = {} is not a positive finite number", v[i])));
        }
        Ok(ScalesSection(v))
    }
}

/// Activation scales a network's 8-bit datapath needs (one per parameterised layer but the last).
pub fn scales_needed(input: Shape, layers: &[Layer]) -> Result<usize> {
    Ok(crate::cnn_net::param_layers(input, layers)?.len().saturating_sub(1))
}

/// A tensor on the 8-bit datapath: integer values and their scale (real = value x scale): int8 between layers,
/// the last layer's int32 sums at the end.
#[derive(Debug, Clone, PartialEq)]
pub struct QTensor {
    pub v: Vec<i64>,
    pub scale: f64,
}

impl QTensor {
    /// The real values (value x scale).
    pub fn real(&self) -> Vec<f64> {
        self.v.iter().map(|&x| x as f64 * self.scale).collect()
    }
}

/// One convolution's or linear layer's quantised weights, its biases, and its output's activation scale (none for
/// the last layer, whose sums are the output).
#[derive(Debug, Clone)]
struct QLayer {
    w: Vec<i64>,
    scale: f64,
    bias: Vec<f64>,
    out: Option<f64>,
}

/// A network with its weights quantised and its activation scales, for the 8-bit datapath.
#[derive(Debug, Clone)]
pub struct QuantNet {
    input: Shape,
    layers: Vec<Layer>,
    q: Vec<QLayer>,
}

impl QuantNet {
    /// Quantises `params` (exactly `cnn_net::param_count` f32 values, in file order) layer by layer, with the
    /// calibrated activation scales (`scales_needed` of them).
    pub fn new(input: Shape, layers: &[Layer], params: &[f32], scales: &ScalesSection) -> Result<Self> {
        let shapes = param_layers(input, layers)?;
        let total: usize = shapes.iter().map(|(w, b)| w + b).sum();
        if params.len() != total {
            return Err(invalid(format!("weights: {} parameters, the network has {total}", params.len())));
        }
        if scales.0.len() + 1 != shapes.len() {
            return Err(invalid(format!("activation scales: {} given, the network needs {}", scales.0.len(), shapes.len() - 1)));
        }
        let mut at = 0;
        let q = shapes
            .iter()
            .enumerate()
            .map(|(i, &(nw, nb))| {
                let (w, scale) = quantise_weights(&params[at..at + nw]);
                let bias = params[at + nw..at + nw + nb].iter().map(|&b| f64::from(b)).collect();
                at += nw + nb;
                QLayer { w, scale, bias, out: scales.0.get(i).map(|&s| f64::from(s)) }
            })
            .collect();
        Ok(QuantNet { input, layers: layers.to_vec(), q })
    }

    /// The last layer's int32 sums and their scale for one image (u8 pixels in the input's CHW shape).
    pub fn forward(&self, img: &[u8]) -> Result<QTensor> {
        if img.len() != self.input.0 * self.input.1 * self.input.2 {
            return Err(invalid(format!("input: {} bytes, the network takes {}", img.len(), self.input.0 * self.input.1 * self.input.2)));
        }
        let x = QTensor { v: img.iter().map(|&p| i64::from(p)).collect(), scale: 1.0 / 255.0 };
        run(&mut Int8 { q: &self.q, at: 0 }, self.input, &self.layers, x)
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

    /// The sums leave the PE array requantised to the layer's output scale (the last layer's stay int32).
    fn output(l: &QLayer, x_scale: f64, sums: Vec<i64>) -> QTensor {
        let grid = x_scale * l.scale;
        let sums: Vec<i64> = sums.into_iter().map(sat32).collect();
        match l.out {
            Some(s) => QTensor { v: requantise(&sums, fixed_point(grid / s)), scale: s },
            None => QTensor { v: sums, scale: grid },
        }
    }
}

impl Datapath for Int8<'_> {
    type Tensor = QTensor;
    fn conv(&mut self, x: QTensor, s: Shape, spec: ConvSpec) -> Result<(QTensor, Shape)> {
        let l = self.next()?;
        let (y, ns) = conv2d(&x.v, s, &l.w, &Self::bias(l, x.scale), spec)?;
        Ok((Self::output(l, x.scale, y), ns))
    }
    fn linear(&mut self, x: QTensor, _out: usize) -> Result<QTensor> {
        let l = self.next()?;
        let y = linear(&x.v, &l.w, &Self::bias(l, x.scale))?;
        Ok(Self::output(l, x.scale, y))
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
        let hw = (s.1 * s.2) as i64;
        QTensor { v: x.v.chunks(hw as usize).map(|c| (2 * c.iter().sum::<i64>() + hw).div_euclid(2 * hw)).collect(), ..x }
    }
    fn residual(&self, z: QTensor, y: &QTensor) -> QTensor {
        let y_on_z = requantise(&y.v, fixed_point(y.scale / z.scale));
        QTensor { v: z.v.iter().zip(&y_on_z).map(|(&a, &b)| (a + b).clamp(-QMAX, QMAX)).collect(), ..z }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cnn_net::{forward, param_count};

    #[test]
    fn weights_quantise_symmetrically_and_multipliers_are_fixed_point() {
        let (q, s) = quantise_weights(&[0.5, -1.0, 0.25, 0.0]);
        assert_eq!((q, s), (vec![64, -127, 32, 0], 1.0 / 127.0));
        assert_eq!(quantise_weights(&[0.0, 0.0]), (vec![0, 0], 1.0));
        assert_eq!(fixed_point(0.75), (3 << 29, 31));
        assert_eq!(fixed_point(3.0), (3 << 29, 29));
        for m in [1e-9, 0.0123, 0.5, 0.999_999_999_9, 7.25, 1e5] {
            let (mult, shift) = fixed_point(m);
            assert!((1 << 30..1 << 31).contains(&mult) && (1..=62).contains(&shift), "{m}");
            assert!((mult as f64 / 2f64.powi(shift as i32) / m - 1.0).abs() < 1e-9, "{m}");
        }
        assert_eq!(fixed_point(1e-12), (0, 1));
        assert_eq!(fixed_point(f64::NAN), (0, 1));
        assert_eq!(fixed_point(1e12), (i64::from(i32::MAX), 1));
        // Half up, saturating: 10 x 0.75 = 7.5 -> 8, -10 x 0.75 = -7.5 -> -7, 1000 x 0.75 -> 127.
        assert_eq!(requantise(&[10, -10, 1000, -1000], fixed_point(0.75)), vec![8, -7, 127, -127]);
        assert_eq!(round_half_away(-2.5), -3.0);
        assert_eq!(round_half_away(2.4999), 2.0);
    }

    #[test]
    fn the_scales_section_round_trips_and_damage_is_refused() {
        let sec = ScalesSection(vec![0.5, 0.01, 3.0]);
        let b = sec.to_bytes();
        assert_eq!(b.len(), ScalesSection::len_for(3));
        assert_eq!(ScalesSection::parse(&b, 3).unwrap(), sec);
        assert!(ScalesSection::parse(&b, 4).unwrap_err().to_string().contains("needs 4"));
        assert!(ScalesSection::parse(&b[..b.len() - 1], 3).is_err(), "truncated");
        assert!(ScalesSection::parse(&[b.clone(), vec![0]].concat(), 3).is_err(), "trailing byte");
        for at in [0, 4, 9, 20] {
            let mut d = b.clone();
            d[at] ^= 1;
            assert!(ScalesSection::parse(&d, 3).is_err(), "byte {at} flipped");
        }
        let bad = ScalesSection(vec![0.5, f32::NAN, 1.0]).to_bytes();
        assert!(ScalesSection::parse(&bad, 3).unwrap_err().to_string().contains("scale 1"));
        let zero = ScalesSection(vec![0.0, 1.0, 1.0]).to_bytes();
        assert!(ScalesSection::parse(&zero, 3).is_err());
    }

    #[test]
    fn a_small_network_in_int8_is_near_its_float_output() {
        // conv 3x3 (2 -> 4) + ReLU, max pool, depthwise 3x3 + ReLU6, linear 4*2*2 -> 3: int8 within 5% of f32.
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
        // Calibration on this image: each parameterised layer's output after its activation, largest / 127.
        let scale = |upto: usize| {
            let p = param_count(input, &layers[..upto]).unwrap();
            let y = forward(input, &layers[..upto], &params[..p], &x).unwrap();
            y.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0
        };
        let scales = ScalesSection(vec![scale(2), scale(5)]);
        assert_eq!(scales_needed(input, &layers).unwrap(), 2);
        let float = forward(input, &layers, &params, &x).unwrap();
        let q = QuantNet::new(input, &layers, &params, &scales).unwrap().forward(&img).unwrap();
        let real = q.real();
        let norm = float.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>().sqrt();
        let err = float.iter().zip(&real).map(|(a, b)| (f64::from(*a) - b).powi(2)).sum::<f64>().sqrt();
        assert!(err < 0.05 * norm, "int8 {real:?} vs f32 {float:?}");
        assert!(QuantNet::new(input, &layers, &params[1..], &scales).is_err());
        assert!(QuantNet::new(input, &layers, &params, &ScalesSection(vec![1.0])).is_err());
        assert!(QuantNet::new(input, &layers, &params, &scales).unwrap().forward(&img[1..]).is_err());
    }
}
