//! NICE-C (paper Sec. IV-D): the CNN layers the accelerator runs (conv, depthwise, pointwise, pool, linear,
//! activation, inverted residual), their functional kernels in f32 over CHW tensors, and the PE-array timing:
//! every layer's multiply-accumulates spread over `pe_count` PEs whose products meet in an adder tree, with
//! ping-pong buffers overlapping the next tile's load (weights and activations over AXI) with the current compute.

use crate::error::{invalid, Result};
use nearflash_core::config::ParamError;

nearflash_core::ext_params! {
    /// NICE-C parameters in canonical units (Hz, bytes, counts).
    pub struct CnnParams {
        /// FPGA kernel clock.
        clock: Frequency = 200, "MHz", "assumed: NICE gives no FPGA clock; same PL clock as NICE-K";
        /// Multiply-accumulate processing elements of the PE array.
        pe_count: Count = 256, "count", "assumed: NICE Sec. IV-D gives no PE count; 256 of the ZU7EG's 1728 DSP slices (Xilinx DS891) leaves room for NICE-K";
        /// Bytes per weight and activation element.
        element_bytes: Bytes = 1, "B", "assumed: 8-bit quantised inference, as embedded FPGA CNN engines run";
        /// Input bytes per cycle over the PS-PL AXI port.
        axi_bytes_per_cycle: Bytes = 16, "B", "Xilinx UG1085: Zynq UltraScale+ PS-PL high-performance AXI ports are 128 bits wide";
    }
}

impl CnnParams {
    pub fn from_json(v: &serde_json::Value) -> Result<Self> {
        let mut p = CnnParams::default();
        nearflash_core::config::ExtParams::apply_json_object(&mut p, v, &[])
            .map_err(|e: ParamError| invalid(format!("NICE-C {e}")))?;
        if p.clock <= 0.0 || p.pe_count < 1.0 || p.element_bytes <= 0.0 || p.axi_bytes_per_cycle <= 0.0 {
            return Err(invalid("NICE-C parameters must be positive"));
        }
        Ok(p)
    }
}

/// Activation functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    Relu,
    Relu6,
}

/// One layer as NICE-C schedules it.
#[derive(Debug, Clone, PartialEq)]
pub enum Layer {
    /// Convolution; `groups == in channels == out` is depthwise, `k == 1, groups == 1` pointwise.
    Conv { out: usize, k: usize, stride: usize, pad: usize, groups: usize },
    MaxPool { k: usize, stride: usize },
    GlobalAvgPool,
    Linear { out: usize },
    Act(Act),
    /// MobileNetV2 block: pointwise expand (t x) + ReLU6, depthwise 3x3 + ReLU6, pointwise project; residual
    /// when stride 1 and channels match.
    InvertedResidual { expand: usize, out: usize, stride: usize },
}

/// (channels, height, width).
pub type Shape = (usize, usize, usize);

fn conv_out(h: usize, k: usize, stride: usize, pad: usize) -> Result<usize> {
    if stride == 0 || k == 0 || h + 2 * pad < k {
        return Err(invalid(format!("kernel {k} stride {stride} pad {pad} on size {h}")));
    }
    Ok((h + 2 * pad - k) / stride + 1)
}

/// Output shape, multiply-accumulates and weight count of a layer on `input`.
pub fn layer_cost(l: &Layer, input: Shape) -> Result<(Shape, u64, u64)> {
    let (c, h, w) = input;
    Ok(match *l {
        Layer::Conv { out, k, stride, pad, groups } => {
            if groups == 0 || c % groups != 0 || out % groups != 0 || out == 0 {
                return Err(invalid(format!("conv {c}->{out} channels in {groups} groups")));
            }
            let (oh, ow) = (conv_out(h, k, stride, pad)?, conv_out(w, k, stride, pad)?);
            let per_out = (c / groups * k * k) as u64;
            ((out, oh, ow), (out * oh * ow) as u64 * per_out, out as u64 * per_out)
        }
        Layer::MaxPool { k, stride } => ((c, conv_out(h, k, stride, 0)?, conv_out(w, k, stride, 0)?), 0, 0),
        Layer::GlobalAvgPool => ((c, 1, 1), 0, 0),
        Layer::Linear { out } => ((out, 1, 1), (c * h * w * out) as u64, (c * h * w * out) as u64),
        Layer::Act(_) => (input, 0, 0),
        Layer::InvertedResidual { expand, out, stride } => {
            let hidden = c * expand.max(1);
            let mut s = input;
            let (mut macs, mut weights) = (0, 0);
            let parts = [
                (expand > 1).then_some(Layer::Conv { out: hidden, k: 1, stride: 1, pad: 0, groups: 1 }),
                Some(Layer::Conv { out: hidden, k: 3, stride, pad: 1, groups: hidden }),
                Some(Layer::Conv { out, k: 1, stride: 1, pad: 0, groups: 1 }),
            ];
            for p in parts.iter().flatten() {
                let (ns, m, wt) = layer_cost(p, s)?;
                s = ns;
                macs += m;
                weights += wt;
            }
            (s, macs, weights)
        }
    })
}

/// MobileNetV2 (width 1.0) on 224x224x3, as Sandler et al. Table 2 lists it; ~300 M multiply-adds.
pub fn mobilenet_v2() -> (Shape, Vec<Layer>) {
    let mut l = vec![Layer::Conv { out: 32, k: 3, stride: 2, pad: 1, groups: 1 }, Layer::Act(Act::Relu6)];
    // (expansion t, channels c, repeats n, first stride s)
    for (t, c, n, s) in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)] {
        for i in 0..n {
            l.push(Layer::InvertedResidual { expand: t, out: c, stride: if i == 0 { s } else { 1 } });
        }
    }
    l.extend([
        Layer::Conv { out: 1280, k: 1, stride: 1, pad: 0, groups: 1 },
        Layer::Act(Act::Relu6),
        Layer::GlobalAvgPool,
        Layer::Linear { out: 1000 },
    ]);
    ((3, 224, 224), l)
}

/// Timing of a network run for one batch on NICE-C.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CnnTiming {
    pub macs: u64,
    pub weights: u64,
    pub cycles: f64,
    pub seconds: f64,
}

/// Per layer: compute = ceil(batch x MACs / PEs) + adder-tree depth; load = (weights + batch x input elements) x
/// bytes / AXI width; ping-pong buffers overlap the two, so a layer costs their maximum.
pub fn network_timing(input: Shape, layers: &[Layer], batch: usize, p: &CnnParams) -> Result<CnnTiming> {
    if batch == 0 {
        return Err(invalid("batch must be at least 1"));
    }
    let tree = p.pe_count.log2().ceil();
    let (mut s, mut macs, mut weights, mut cycles) = (input, 0u64, 0u64, 0f64);
    for l in layers {
        let (ns, m, w) = layer_cost(l, s)?;
        let compute = if m == 0 { (batch * s.0 * s.1 * s.2) as f64 / p.pe_count } else { (batch as f64 * m as f64 / p.pe_count).ceil() + tree };
        let load = (w as f64 + (batch * s.0 * s.1 * s.2) as f64) * p.element_bytes / p.axi_bytes_per_cycle;
        cycles += compute.max(load);
        macs += m;
        weights += w;
        s = ns;
    }
    Ok(CnnTiming { macs, weights, cycles, seconds: cycles / p.clock })
}

/// The geometry of a convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvSpec {
    pub out: usize,
    pub k: usize,
    pub stride: usize,
    pub pad: usize,
    pub groups: usize,
}

/// The element arithmetic the kernels need: f32 for the float path, i64 (holding int8 operands and int32 sums)
/// for the 8-bit path (`quant.rs`).
pub trait Element: Copy + Default + PartialOrd + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> + std::iter::Sum {}
impl<T: Copy + Default + PartialOrd + std::ops::Add<Output = T> + std::ops::Mul<Output = T> + std::iter::Sum> Element for T {}

/// A grouped 2-D convolution over a CHW tensor (weights `[out][in/groups][k][k]`, bias per output channel); each
/// output starts at its bias and adds the products in (channel, row, column) order.
pub fn conv2d<T: Element>(x: &[T], input: Shape, wts: &[T], bias: &[T], spec: ConvSpec) -> Result<(Vec<T>, Shape)> {
    let ConvSpec { out, k, stride, pad, groups } = spec;
    let l = Layer::Conv { out, k, stride, pad, groups };
    let ((_, oh, ow), _, nw) = layer_cost(&l, input)?;
    let (c, h, w) = input;
    if x.len() != c * h * w || wts.len() as u64 != nw || bias.len() != out {
        return Err(invalid(format!("conv: {} inputs, {} weights, {} biases for {input:?} -> {out}", x.len(), wts.len(), bias.len())));
    }
    let (cin, cout) = (c / groups, out / groups);
    let mut y = vec![T::default(); out * oh * ow];
    for o in 0..out {
        let g = o / cout;
        for oy in 0..oh {
            for ox in 0..ow {
                let mut acc = bias[o];
                for ci in 0..cin {
                    for ky in 0..k {
                        for kx in 0..k {
                            let (iy, ix) = ((oy * stride + ky) as isize - pad as isize, (ox * stride + kx) as isize - pad as isize);
                            if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                continue;
                            }
                            let xi = ((g * cin + ci) * h + iy as usize) * w + ix as usize;
                            acc = acc + x[xi] * wts[((o * cin + ci) * k + ky) * k + kx];
                        }
                    }
                }
                y[(o * oh + oy) * ow + ox] = acc;
            }
        }
    }
    Ok((y, (out, oh, ow)))
}

/// Max pooling.
pub fn max_pool<T: Element>(x: &[T], input: Shape, k: usize, stride: usize) -> Result<(Vec<T>, Shape)> {
    let ((c, oh, ow), _, _) = layer_cost(&Layer::MaxPool { k, stride }, input)?;
    let (_, h, w) = input;
    if x.len() != c * h * w {
        return Err(invalid("max_pool: input length does not match its shape"));
    }
    let mut y = Vec::with_capacity(c * oh * ow);
    for ch in 0..c {
        for oy in 0..oh {
            for ox in 0..ow {
                let at = |ky: usize, kx: usize| x[(ch * h + oy * stride + ky) * w + ox * stride + kx];
                let mut m = at(0, 0);
                for ky in 0..k {
                    for kx in 0..k {
                        if at(ky, kx) > m {
                            m = at(ky, kx);
                        }
                    }
                }
                y.push(m);
            }
        }
    }
    Ok((y, (c, oh, ow)))
}

/// A fully connected layer over the flattened input (weights `[out][in]`): each output is its bias plus the sum of
/// the products.
pub fn linear<T: Element>(x: &[T], wts: &[T], bias: &[T]) -> Result<Vec<T>> {
    let n = x.len();
    if n == 0 || wts.len() != n * bias.len() {
        return Err(invalid(format!("linear: {n} inputs, {} weights, {} biases", wts.len(), bias.len())));
    }
    Ok(bias.iter().zip(wts.chunks_exact(n)).map(|(&b, w)| b + w.iter().zip(x).map(|(&a, &c)| a * c).sum::<T>()).collect())
}

/// Activation in place.
pub fn activate(x: &mut [f32], a: Act) {
    for v in x {
        *v = match a {
            Act::Relu => v.max(0.0),
            Act::Relu6 => v.clamp(0.0, 6.0),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mobilenet_v2_has_its_published_size() {
        let (shape, layers) = mobilenet_v2();
        let t = network_timing(shape, &layers, 1, &CnnParams::default()).unwrap();
        // Sandler et al. 2018, Table 3: 300 M multiply-adds, 3.4 M parameters (biases and BN not counted here).
        assert!((290e6..310e6).contains(&(t.macs as f64)), "{} MACs", t.macs);
        assert!((3.3e6..3.6e6).contains(&(t.weights as f64)), "{} weights", t.weights);
        let t8 = network_timing(shape, &layers, 8, &CnnParams::default()).unwrap();
        assert!(t8.cycles > 4.0 * t.cycles && t8.cycles < 8.0 * t.cycles, "weights loaded once per batch");
    }

    #[test]
    fn conv_kernels_agree_with_hand_results() {
        // 1x3x3 input, 2x2 kernel of ones, stride 1: sums of 2x2 windows plus bias.
        let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let (y, s) = conv2d(&x, (1, 3, 3), &[1.0; 4], &[0.5], ConvSpec { out: 1, k: 2, stride: 1, pad: 0, groups: 1 }).unwrap();
        assert_eq!(s, (1, 2, 2));
        assert_eq!(y, vec![12.5, 16.5, 24.5, 28.5]);
        // Depthwise = each channel convolved alone; pointwise = per-pixel channel mix.
        let x2: Vec<f32> = (0..8).map(|v| v as f32).collect();
        let (dw, _) = conv2d(&x2, (2, 2, 2), &[1.0, 2.0], &[0.0, 0.0], ConvSpec { out: 2, k: 1, stride: 1, pad: 0, groups: 2 }).unwrap();
        assert_eq!(dw, vec![0.0, 1.0, 2.0, 3.0, 8.0, 10.0, 12.0, 14.0]);
        let (pw, _) = conv2d(&x2, (2, 2, 2), &[1.0, 1.0], &[0.0], ConvSpec { out: 1, k: 1, stride: 1, pad: 0, groups: 1 }).unwrap();
        assert_eq!(pw, vec![4.0, 6.0, 8.0, 10.0]);
        let (mp, _) = max_pool(&x, (1, 3, 3), 2, 1).unwrap();
        assert_eq!(mp, vec![5.0, 6.0, 8.0, 9.0]);
        let mut a = vec![-1.0, 3.0, 9.0];
        activate(&mut a, Act::Relu6);
        assert_eq!(a, vec![0.0, 3.0, 6.0]);
    }

    #[test]
    fn bad_layers_are_refused() {
        assert!(conv2d(&[0.0; 9], (1, 3, 3), &[1.0; 3], &[0.0], ConvSpec { out: 1, k: 2, stride: 1, pad: 0, groups: 1 }).is_err(), "weights");
        assert!(conv2d(&[0.0; 9], (1, 3, 3), &[1.0; 16], &[0.0], ConvSpec { out: 1, k: 4, stride: 1, pad: 0, groups: 1 }).is_err(), "kernel larger than input");
        assert!(layer_cost(&Layer::Conv { out: 3, k: 1, stride: 1, pad: 0, groups: 2 }, (4, 4, 4)).is_err());
        assert!(layer_cost(&Layer::Conv { out: 4, k: 1, stride: 0, pad: 0, groups: 1 }, (4, 4, 4)).is_err());
        assert!(network_timing((3, 8, 8), &[], 0, &CnnParams::default()).is_err());
        assert!(CnnParams::from_json(&serde_json::json!({"pe_count": 0})).is_err());
    }
}
