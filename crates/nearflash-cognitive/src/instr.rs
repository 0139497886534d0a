//! DLG-x instructions as the compiler emits them into the instruction area: 32 bytes each, little-endian, with the
//! physical address of the layer's first weight (or graph) page embedded, so the device does no address translation
//! (Sec. 3.1.1). Layout: op u8 | kernel u8 | stride u8 | pad u8 | in_ch u16 | in_h u16 | in_w u16 | out_ch u16 |
//! first page: way u8, rsvd u8, block u16, page u16 | pages per channel u16 | sub-block bytes u32 | mult i32 |
//! shift u8 | rsvd 3.

use crate::error::{CognitiveError, Result};
use crate::network::{Layer, Network};
use crate::quant::QModel;
use crate::weight_layout::{PhysPage, WeightLayout};

pub const INSTR_BYTES: usize = 32;

/// Instruction opcodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    Conv = 1,
    MaxPool = 2,
    Relu = 3,
    Fc = 4,
    /// The hash layer: FC whose int32 sign gives the code.
    Hash = 5,
}

/// One decoded instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instr {
    pub op: Op,
    pub kernel: u8,
    pub stride: u8,
    pub pad: u8,
    pub in_shape: [u16; 3],
    pub out_ch: u16,
    /// First weight page (channel 0; the same position on every channel).
    pub weights: PhysPage,
    pub pages: u16,
    pub sub_block: u32,
    pub mult: i32,
    pub shift: u8,
}

fn narrow<T: TryFrom<usize>>(v: usize, what: &str, layer: &str) -> Result<T> {
    T::try_from(v).map_err(|_| CognitiveError::Unsupported { layer: layer.into(), why: format!("{what} {v} does not fit its instruction field") })
}

impl Instr {
    pub fn encode(&self) -> [u8; INSTR_BYTES] {
        let mut b = [0u8; INSTR_BYTES];
        b[0] = self.op as u8;
        b[1] = self.kernel;
        b[2] = self.stride;
        b[3] = self.pad;
        for (i, d) in self.in_shape.iter().enumerate() {
            b[4 + 2 * i..6 + 2 * i].copy_from_slice(&d.to_le_bytes());
        }
        b[10..12].copy_from_slice(&self.out_ch.to_le_bytes());
        b[12] = self.weights.way as u8;
        b[14..16].copy_from_slice(&(self.weights.block as u16).to_le_bytes());
        b[16..18].copy_from_slice(&(self.weights.page as u16).to_le_bytes());
        b[18..20].copy_from_slice(&self.pages.to_le_bytes());
        b[20..24].copy_from_slice(&self.sub_block.to_le_bytes());
        b[24..28].copy_from_slice(&self.mult.to_le_bytes());
        b[28] = self.shift;
        b
    }

    /// Parses one instruction (from flash: untrusted).
    pub fn decode(b: &[u8]) -> Result<Instr> {
        let bad = |why: String| CognitiveError::bad_file("instruction", why);
        if b.len() != INSTR_BYTES {
            return Err(bad(format!("{} bytes; instructions are {INSTR_BYTES}", b.len())));
        }
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let op = match b[0] {
            1 => Op::Conv,
            2 => Op::MaxPool,
            3 => Op::Relu,
            4 => Op::Fc,
            5 => Op::Hash,
            o => return Err(bad(format!("opcode {o}; 1-5 allowed"))),
        };
        if b[13] != 0 || b[29..32].iter().any(|&x| x != 0) {
            return Err(bad("reserved bytes are not 0".into()));
        }
        let in_shape = [u16_at(4), u16_at(6), u16_at(8)];
        if in_shape.contains(&0) {
            return Err(bad(format!("input shape {in_shape:?} has a zero dimension")));
        }
        let shift = b[28];
        if matches!(op, Op::Conv | Op::Fc) && !(31..=62).contains(&shift) {
            return Err(bad(format!("requantisation shift {shift}; 31 to 62 allowed")));
        }
        Ok(Instr {
            op,
            kernel: b[1],
            stride: b[2],
            pad: b[3],
            in_shape,
            out_ch: u16_at(10),
            weights: PhysPage { channel: 0, way: b[12] as usize, block: u16_at(14) as usize, page: u16_at(16) as usize },
            pages: u16_at(18),
            sub_block: u32::from_le_bytes([b[20], b[21], b[22], b[23]]),
            mult: i32::from_le_bytes([b[24], b[25], b[26], b[27]]),
            shift,
        })
    }
}

/// Compiles `model` laid out by `layout` into instructions (flatten emits none: it moves no data).
pub fn compile(model: &QModel, layout: &WeightLayout) -> Result<Vec<Instr>> {
    let net: &Network = &model.network;
    let shapes = net.shapes()?;
    let mut out = Vec::new();
    let mut wi = 0usize;
    let last = net.body.len() - 1;
    for (i, l) in net.body.iter().enumerate() {
        let s = shapes[i];
        let label = l.label();
        let in_shape = [narrow(s[0], "channels", &label)?, narrow(s[1], "height", &label)?, narrow(s[2], "width", &label)?];
        let blank = Instr {
            op: Op::Relu,
            kernel: 0,
            stride: 0,
            pad: 0,
            in_shape,
            out_ch: 0,
            weights: PhysPage { channel: 0, way: 0, block: 0, page: 0 },
            pages: 0,
            sub_block: 0,
            mult: 0,
            shift: 0,
        };
        let ins = match l {
            Layer::Relu => blank,
            Layer::Flatten => continue,
            Layer::MaxPool { size, stride } => Instr { op: Op::MaxPool, kernel: narrow(*size, "size", &label)?, stride: narrow(*stride, "stride", &label)?, ..blank },
            Layer::Conv { .. } | Layer::Fc { .. } => {
                let lp = &layout.layers[wi];
                let q = &model.layers[wi];
                wi += 1;
                let first = lp.kernels[0].page;
                let end = lp.kernels.iter().map(|k| k.page + k.pages).max().unwrap();
                let (kernel, stride, pad, out_ch) = match l {
                    Layer::Conv { kernel, stride, pad, out_ch, .. } => (*kernel, *stride, *pad, *out_ch),
                    Layer::Fc { outputs, .. } => (1, 1, 0, *outputs),
                    _ => unreachable!(),
                };
                Instr {
                    op: match l {
                        Layer::Conv { .. } => Op::Conv,
                        _ if i == last => Op::Hash,
                        _ => Op::Fc,
                    },
                    kernel: narrow(kernel, "kernel", &label)?,
                    stride: narrow(stride, "stride", &label)?,
                    pad: narrow(pad, "pad", &label)?,
                    out_ch: narrow(out_ch, "output channels", &label)?,
                    weights: layout.area.page(0, first)?,
                    pages: narrow(end - first, "weight pages", &label)?,
                    sub_block: narrow(lp.sub_block, "sub-block", &label)?,
                    mult: q.mult,
                    shift: q.shift as u8,
                    ..blank
                }
            }
        };
        out.push(ins);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;
    use crate::network::fashion_hash_cnn;
    use crate::weight_layout::ReservedArea;

    #[test]
    fn compile_encode_decode() {
        let m = Model::random(fashion_hash_cnn(48), 2).unwrap();
        let q = QModel::quantise(&m, &[&[90u8; 784]]).unwrap();
        let area = ReservedArea { channels: 8, ways: 8, first_block: 1000, blocks: 24, pages_per_block: 256, page_size: 16384 };
        let wl = WeightLayout::plan(&q, area).unwrap();
        let prog = compile(&q, &wl).unwrap();
        assert_eq!(prog.iter().map(|i| i.op).collect::<Vec<_>>(), vec![Op::Conv, Op::Relu, Op::MaxPool, Op::Conv, Op::Relu, Op::MaxPool, Op::Fc, Op::Relu, Op::Hash]);
        assert_eq!(prog[0].weights.block, 1000, "physical address embedded");
        for ins in &prog {
            let b = ins.encode();
            assert_eq!(Instr::decode(&b).unwrap(), *ins);
        }
        let mut b = prog[0].encode();
        b[0] = 9;
        assert!(Instr::decode(&b).is_err());
        let mut b = prog[0].encode();
        b[30] = 1;
        assert!(Instr::decode(&b).is_err());
        assert!(Instr::decode(&b[..31]).is_err());
    }
}
