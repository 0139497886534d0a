//! Device-defined programs: fixed functions the device ships in program slots the host cannot download into (the
//! Computational Programs command set's device-defined programs; Load Program on their index completes with
//! Program Index Not Downloadable). They are activated and executed like downloaded programs, over a memory range
//! set, but run natively and are charged to a declared fixed-function unit, not counted eBPF instructions.
//!
//! One is provided: **SparseLengthsSum over fp32 rows**, RecSSD's operator (eBPF has no floating point, so a C
//! program can only do it in fixed point, as `examples/programs/sls.c` does). Ranges: 0 table (`rows x dim` f32),
//! 1 indices (u32), 2 lengths (one u32 per bag), 3 output (`bags x dim` f32); CPARAM1 = dim. The sum is RecSSD's
//! own reference (`nearflash_recssd::sls::embedding_bag_sum_into`). Cost: every gathered row crosses controller
//! DRAM, and the unit adds `dim` lanes per row at `sls_unit_lanes` fp32 adds per cycle.

use nearflash_core::ext::{ExecCtx, UnitHandle, UnitSpec};
use nearflash_core::ext::Time;
use nearflash_recssd::sls::{embedding_bag_sum_into, TableView};

/// Device-defined programs and their descriptions; their indexes follow the downloadable slots.
pub const PROGRAMS: [(&str, &str); 1] = [("sls_f32", "SparseLengthsSum over fp32 rows (RecSSD's operator) on a fixed-function unit")];

/// Name of the declared unit.
pub const UNIT: &str = "programs.sls_unit";

/// The unit's declaration from the extension's parameters.
pub fn unit_spec(clock_hz: f64, pj_per_cycle: f64) -> UnitSpec {
    UnitSpec { name: UNIT.into(), count: 1, freq_hz: clock_hz, pj_per_cycle, static_mw: 0.0 }
}

/// Why a fixed-function run was refused (reported like a program's own error return).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

fn words<T: Copy>(bytes: &[u8], from: fn([u8; 4]) -> T) -> Vec<T> {
    bytes.chunks_exact(4).map(|c| from([c[0], c[1], c[2], c[3]])).collect()
}

/// Runs `sls_f32` over `ranges`, books its cost from `ready`; returns (bags summed, when done).
pub fn sls_f32(
    ctx: &mut ExecCtx<'_>,
    unit: UnitHandle,
    lanes: f64,
    ranges: &mut [&mut [u8]],
    dim: u64,
    ready: Time,
) -> Result<(u64, Time), Refused> {
    let [table, idx, lens, out] = ranges else {
        return Err(Refused(format!("sls_f32 needs 4 ranges (table, indices, lengths, output), got {}", ranges.len())));
    };
    // CPARAM1 is the host's: every product with it is checked (a row of 2^62 f32 would wrap to 0 bytes).
    let row_bytes = usize::try_from(dim).ok().filter(|&d| d > 0).and_then(|d| d.checked_mul(4)).filter(|&b| b <= out.len());
    let Some(row_bytes) = row_bytes else {
        return Err(Refused(format!("dim (cparam1) = {dim}: expected 1..={} (a row of f32 within the {}-byte output range)", out.len() / 4, out.len())));
    };
    let dim = row_bytes / 4;
    if table.len() % row_bytes != 0 || idx.len() % 4 != 0 || lens.len() % 4 != 0 {
        return Err(Refused("range lengths must be whole rows and whole u32s".into()));
    }
    let rows = table.len() / row_bytes;
    let values: Vec<f32> = words(table, f32::from_le_bytes);
    let indices: Vec<u32> = words(idx, u32::from_le_bytes);
    let lengths: Vec<u32> = words(lens, u32::from_le_bytes);
    let mut offsets = Vec::with_capacity(lengths.len());
    let mut at = 0u64;
    for &l in &lengths {
        offsets.push(at);
        at += u64::from(l);
    }
    if at != indices.len() as u64 {
        return Err(Refused(format!("lengths add up to {at}, but there are {} indices", indices.len())));
    }
    let bags = lengths.len();
    if bags.checked_mul(row_bytes) != Some(out.len()) {
        return Err(Refused(format!("the output range must hold {bags} x {dim} f32")));
    }
    let view = TableView::new(&values, rows, dim).map_err(|e| Refused(e.to_string()))?;
    let mut sums = vec![0f32; bags * dim];
    embedding_bag_sum_into(&view, &indices, &offsets, None, false, &mut sums).map_err(|e| Refused(e.to_string()))?;
    for (o, v) in out.chunks_exact_mut(4).zip(&sums) {
        o.copy_from_slice(&v.to_le_bytes());
    }
    // Bytes the gather moves: each index names a whole row.
    let gathered = (indices.len() as u64).saturating_mul(row_bytes as u64).saturating_add((idx.len() + lens.len() + out.len()) as u64);
    let moved = ctx.dram(ready, gathered);
    let cycles = indices.len() as f64 * dim as f64 / lanes.max(1e-9);
    let added = ctx.compute(ready, unit, 0, cycles);
    Ok((bags as u64, moved.max(added)))
}
