//! NPE timing (Sec. 4.2): per output channel of a convolution, `L_compute = Kc Kh Kw Oh Ow / N_PE` cycles (Eq. 2)
//! and `L_data = Kc Kh Kw / BW^m` cycles (Eq. 3); with ping-pong weight buffers the next kernel streams in while
//! the current one computes, so a layer takes the first kernel's load plus `max(L_compute, L_data)` per kernel.
//! FC layers run on one PE column (bandwidth-bound). Pooling and activation take `elements / N_PE` cycles. A
//! kernel larger than a weight buffer bank is re-fetched once per output row (the paper: "parameters exceeding the
//! size of weight buffer will be repetitively fetched").

use crate::error::Result;
use crate::network::{Layer, Network};
use crate::params::CognitiveParams;

/// Timing of one layer.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerTiming {
    pub layer: String,
    pub compute_cycles: f64,
    pub data_cycles: f64,
    /// Cycles with ping-pong overlap.
    pub cycles: f64,
    /// Weight bytes read from flash (re-fetches included).
    pub weight_bytes: f64,
    /// Eq. 4 holds (no NPE stall) for a convolution.
    pub compute_bound: bool,
}

/// Eq. 4's threshold: the smallest output width at which a convolution does not stall, `sqrt(N_PE / BW^m)`.
pub fn eq4_min_width(p: &CognitiveParams) -> f64 {
    (p.n_pe / p.bytes_per_cycle()).sqrt()
}

/// Per-layer timing of `net` on DLG-x.
pub fn timing(net: &Network, p: &CognitiveParams) -> Result<Vec<LayerTiming>> {
    let shapes = net.shapes()?;
    let bw = p.bytes_per_cycle();
    let mut out = Vec::new();
    for (i, l) in net.body.iter().enumerate() {
        let (s, o) = (shapes[i], shapes[i + 1]);
        let t = match l {
            Layer::Conv { in_ch, out_ch, kernel, .. } => {
                let ks = (*in_ch * kernel * kernel) as f64;
                let lc = ks * (o[1] * o[2]) as f64 / p.n_pe; // Eq. 2
                let refetch = if ks > p.weight_buffer { o[1] as f64 } else { 1.0 };
                let ld = ks * refetch / bw; // Eq. 3
                let per = lc.max(ld);
                LayerTiming {
                    layer: l.label(),
                    compute_cycles: lc * *out_ch as f64,
                    data_cycles: ld * *out_ch as f64,
                    cycles: ld + per * *out_ch as f64,
                    weight_bytes: ks * refetch * *out_ch as f64,
                    compute_bound: lc >= ld,
                }
            }
            Layer::Fc { inputs, outputs, .. } => {
                let lc = *inputs as f64 / p.pe_column; // one MAC per PE of the column per cycle
                let ld = *inputs as f64 / bw;
                LayerTiming {
                    layer: l.label(),
                    compute_cycles: lc * *outputs as f64,
                    data_cycles: ld * *outputs as f64,
                    cycles: ld + lc.max(ld) * *outputs as f64,
                    weight_bytes: (*inputs * *outputs) as f64,
                    compute_bound: lc >= ld,
                }
            }
            Layer::MaxPool { size, .. } => {
                let c = (o[0] * o[1] * o[2] * size * size) as f64 * p.elementwise_cycles / p.n_pe;
                LayerTiming { layer: l.label(), compute_cycles: c, data_cycles: 0.0, cycles: c, weight_bytes: 0.0, compute_bound: true }
            }
            Layer::Relu => {
                let c = (s[0] * s[1] * s[2]) as f64 * p.elementwise_cycles / p.n_pe;
                LayerTiming { layer: l.label(), compute_cycles: c, data_cycles: 0.0, cycles: c, weight_bytes: 0.0, compute_bound: true }
            }
            Layer::Flatten => {
                LayerTiming { layer: l.label(), compute_cycles: 0.0, data_cycles: 0.0, cycles: 0.0, weight_bytes: 0.0, compute_bound: true }
            }
        };
        out.push(t);
    }
    Ok(out)
}

/// Whole-network hashing latency in ns.
pub fn hashing_ns(net: &Network, p: &CognitiveParams) -> Result<f64> {
    Ok(timing(net, p)?.iter().map(|t| t.cycles).sum::<f64>() * p.cycle_ns())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::{fashion_hash_cnn, hash_alexnet};

    #[test]
    fn equations_2_to_4() {
        let p = CognitiveParams::default();
        assert_eq!(eq4_min_width(&p), 4.0); // the paper: "four in our prototype"
        let net = Network {
            input: [8, 10, 10],
            body: vec![Layer::Conv { name: "c".into(), in_ch: 8, out_ch: 4, kernel: 3, stride: 1, pad: 0 }],
            classifier: None,
        };
        let t = &timing(&net, &p).unwrap()[0];
        // Eq. 2: 72 * 64 / 256 = 18 cycles per kernel; Eq. 3: 72 / 16 = 4.5
        assert_eq!(t.compute_cycles, 18.0 * 4.0);
        assert_eq!(t.data_cycles, 4.5 * 4.0);
        assert_eq!(t.cycles, 4.5 + 18.0 * 4.0);
        assert!(t.compute_bound);
        // Ow = 3 < 4: data-bound (Eq. 4)
        let small = Network { input: [8, 5, 5], ..net };
        assert!(!timing(&small, &p).unwrap()[0].compute_bound);
    }

    #[test]
    fn alexnet_fc_is_bandwidth_bound_and_convs_are_not() {
        let p = CognitiveParams::default();
        let t = timing(&hash_alexnet(48), &p).unwrap();
        for lt in &t {
            if lt.layer.starts_with("conv") {
                assert!(lt.compute_bound, "{}: AlexNet's smallest conv output is 13 >= 4", lt.layer);
            }
            if lt.layer.starts_with("fc") {
                assert_eq!(lt.compute_cycles, lt.data_cycles, "one PE column matches 16 B/cycle");
            }
        }
        let ms = hashing_ns(&hash_alexnet(48), &p).unwrap() / 1e6;
        assert!(ms > 10.0 && ms < 200.0, "{ms} ms");
        assert!(hashing_ns(&fashion_hash_cnn(48), &p).unwrap() < 1e6);
    }
}
