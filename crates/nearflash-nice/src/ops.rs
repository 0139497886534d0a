//! The ops an invocation runs over a file's bytes (what a NICE_Write block binds): parsing the block, and running
//! CRC-32 / byte sum on the A53, NICE-K on `nice.knn` and NICE-C on `nice.cnn`, with their timing.

use crate::cnn::{network_timing, CnnParams};
use crate::firmware::{OP_CNN, OP_CRC32, OP_FSR, OP_KNN, OP_KNN_BATCH, OP_LOCATE, OP_SUM};
use crate::knn::{knn_batch, knn_batch_timing, reported, KnnParams, Width};
use nearflash_core::ext::Time;
use nearflash_core::ext::{ExecCtx, Status, UnitHandle};

/// Firmware instructions per byte processed by the software ops on the A53 (CRC table walk), assumed.
const OP_INSTR_PER_BYTE: f64 = 2.0;

/// The FPGA units an op may run on, with their parameters.
pub(crate) struct Units<'a> {
    pub knn: Option<UnitHandle>,
    pub knn_params: &'a KnnParams,
    pub cnn: Option<UnitHandle>,
    pub cnn_params: &'a CnnParams,
    /// NICE-C's arithmetic (`cnn_precision`).
    pub cnn_precision: crate::cnn_net::Precision,
}

/// A parsed NICE_Write block.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Job {
    Crc,
    Sum,
    /// NICE-K: one query (op 3) or a batch answered in one pass over the file (op 7, `batch`).
    Knn { width: Width, dim: usize, k: usize, queries: Vec<Vec<i64>>, batch: bool },
    Locate,
    Fsr { path: String },
    /// NICE-C network `net` (`cnn_net::named`) over the bound file's images; weights in the file whose first sector
    /// is `weights_head`.
    Cnn { net: u8, weights_head: u64 },
}

impl Job {
    /// Parses a NICE_Write block; a refusal names the byte of the block that is wrong and what it may hold.
    pub(crate) fn parse(b: &[u8]) -> Result<Job, String> {
        let short = |need: usize| format!("NICE_Write block of {} bytes: op {} needs {need}", b.len(), b[0]);
        let Some(&op) = b.first() else { return Err("empty NICE_Write block: byte 0 is the op id".into()) };
        match u32::from(op) {
            OP_CRC32 => Ok(Job::Crc),
            OP_SUM => Ok(Job::Sum),
            OP_LOCATE => Ok(Job::Locate),
            OP_CNN => {
                let head = b.get(8..16).ok_or_else(|| short(16))?;
                let net = b[1];
                crate::cnn_net::named(net).ok_or_else(|| format!("NICE-C network (block byte 1) = {net}: expected 0 (LeNet-5) or 1 (MobileNetV2)"))?;
                Ok(Job::Cnn { net, weights_head: u64::from_le_bytes(head.try_into().expect("8 bytes")) })
            }
            OP_FSR => {
                let rest = &b[1..];
                let end = rest.iter().position(|&c| c == 0).ok_or("FSR path (block bytes 1..) has no terminating 0 byte")?;
                let path = std::str::from_utf8(&rest[..end]).map_err(|_| "FSR path (block bytes 1..) is not UTF-8".to_string())?;
                if !path.starts_with('/') {
                    return Err(format!("FSR path {path:?} (block bytes 1..): expected an absolute path starting with '/'"));
                }
                Ok(Job::Fsr { path: path.to_string() })
            }
            op @ (OP_KNN | OP_KNN_BATCH) => {
                let batch = op == OP_KNN_BATCH;
                let head = b.get(..8).ok_or_else(|| short(8))?;
                let bits = head[1];
                let width = Width::from_bits(u32::from(bits)).map_err(|_| format!("NICE-K width (block byte 1) = {bits} bits: expected 16 or 32"))?;
                let dim = usize::from(u16::from_le_bytes([head[2], head[3]]));
                let k = usize::from(u16::from_le_bytes([head[4], head[5]]));
                if dim == 0 || dim > crate::knn::MAX_DIM {
                    return Err(format!("NICE-K dim (block bytes 2..4) = {dim}: expected 1..={}", crate::knn::MAX_DIM));
                }
                if k == 0 || k > crate::knn::MAX_K {
                    return Err(format!("NICE-K k (block bytes 4..6) = {k}: expected 1..={}", crate::knn::MAX_K));
                }
                // Op 7 counts its queries in bytes 6..8 (0 is refused); op 3 carries one.
                let n = if batch { usize::from(u16::from_le_bytes([head[6], head[7]])) } else { 1 };
                if n == 0 {
                    return Err("NICE-K batch query count (block bytes 6..8) = 0: expected at least 1".into());
                }
                let q = b.get(8..8 + 4 * dim * n).ok_or_else(|| short(8 + 4 * dim * n))?;
                let values: Vec<i64> = q.chunks(4).map(|c| i64::from(i32::from_le_bytes(c.try_into().expect("4 bytes")))).collect();
                // The query travels as i32 whatever the width; a 16-bit embedding's distance unit takes 16-bit values.
                if let Some(at) = values.iter().position(|v| !width.range().contains(v)) {
                    return Err(format!(
                        "NICE-K query value {} (block bytes {}..{}): a {bits}-bit embedding takes {}..={}",
                        values[at],
                        8 + 4 * at,
                        12 + 4 * at,
                        width.range().start(),
                        width.range().end()
                    ));
                }
                Ok(Job::Knn { width, dim, k, queries: values.chunks(dim).map(<[i64]>::to_vec).collect(), batch })
            }
            other => Err(format!(
                "op id (block byte 0) = {other}: expected {OP_CRC32} (CRC-32), {OP_SUM} (sum), {OP_KNN} (NICE-K), {OP_KNN_BATCH} (NICE-K batch), {OP_LOCATE} (locate), {OP_CNN} (NICE-C), or {OP_FSR} (FSR) at the hyper-address of LBA 0"
            )),
        }
    }

    /// The bytes of the block that define the job (what is saved).
    pub(crate) fn block_len(b: &[u8]) -> usize {
        match u32::from(b[0]) {
            OP_KNN => 8 + 4 * usize::from(u16::from_le_bytes([b[2], b[3]])),
            OP_KNN_BATCH => 8 + 4 * usize::from(u16::from_le_bytes([b[2], b[3]])) * usize::from(u16::from_le_bytes([b[6], b[7]])),
            OP_FSR => 2 + b[1..].iter().position(|&c| c == 0).unwrap_or(0),
            OP_CNN => 16,
            _ => 1,
        }
    }
}

/// Runs a bound op over a file's bytes: (result value, when done); NICE-K appends its neighbours to `tail` (a
/// batch: each query's in turn).
pub(crate) fn compute(u: Units<'_>, ctx: &mut ExecCtx<'_>, job: &Job, (bytes, weights): (&[u8], Option<&[u8]>), out_len: usize, (issued, done): (Time, Time), tail: &mut Vec<u8>) -> Result<(u64, Time), Status> {
    let (knn_unit, knn_params) = (u.knn, u.knn_params);
    Ok(match job {
        Job::Crc => (u64::from(crc32fast::hash(bytes)), ctx.firmware(done, OP_INSTR_PER_BYTE * bytes.len() as f64)),
        Job::Sum => (bytes.iter().map(|&b| u64::from(b)).sum(), ctx.firmware(done, OP_INSTR_PER_BYTE * bytes.len() as f64)),
        Job::Knn { width, dim, k, queries, batch } => {
            // A file that is not whole vectors of this shape is refused, never truncated.
            let best = knn_batch(bytes, *dim, *width, queries, *k, knn_params)
                .map_err(|e| ctx.explain(Status::INVALID_FIELD, None, format!("NICE-K over a file of {} bytes: {e}", bytes.len())))?;
            let pairs: usize = best.iter().map(Vec::len).sum();
            if out_len < RESULT_HEADER + 12 * pairs {
                let why = format!("NICE_Read of {out_len} bytes: the result of {pairs} neighbours takes {} (raise NLB)", RESULT_HEADER + 12 * pairs);
                return Err(ctx.explain(Status::INVALID_FIELD, Some(48), why));
            }
            let n = (bytes.len() / (dim * width.bytes())) as u64;
            let timing = knn_batch_timing(n, *dim, *width, *k, queries.len(), knn_params);
            // The DMA feeds pages to NICE-K as they arrive (paper Sec. IV-D): the unit's AXI stream overlaps the
            // flash reads, so it may start as late as one stream time before the last page lands.
            let stream_ns = (timing.stream_cycles / knn_params.clock * 1e9) as u64;
            let start = done.saturating_sub_ns(stream_ns).max(issued);
            // Each busy query unit (one per query, up to `query_units`) is charged the pass's cycles.
            let unit = knn_unit.ok_or(Status::INTERNAL_ERROR)?;
            let busy = queries.len().min(knn_params.query_units.max(1.0) as usize) as u32;
            let done = (0..busy).map(|lane| ctx.compute(start, unit, lane, timing.total_cycles)).max().unwrap_or(start).max(done);
            for (d, i) in best.iter().flatten() {
                tail.extend_from_slice(&reported(*d).to_le_bytes());
                tail.extend_from_slice(&i.to_le_bytes());
            }
            (if *batch { queries.len() as u64 } else { pairs as u64 }, done)
        }
        Job::Cnn { net, .. } => {
            // NICE-C: the network over every image of the file, weights from the weights file (quantised by the
            // firmware for the 8-bit datapath).
            let (shape, layers) = crate::cnn_net::named(*net).ok_or(Status::INTERNAL_ERROR)?;
            let net = crate::cnn_net::Classifier::new(*net, weights.ok_or(Status::INTERNAL_ERROR)?, u.cnn_precision)
                .map_err(|e| ctx.explain(Status::INVALID_FIELD, None, format!("NICE-C weights file: {e}")))?;
            let frame = net.frame();
            if bytes.is_empty() || bytes.len() % frame != 0 {
                let why = format!("NICE-C input file of {} bytes: expected 1 or more whole images of {frame} bytes ({}x{}x{})", bytes.len(), shape.0, shape.1, shape.2);
                return Err(ctx.explain(Status::INVALID_FIELD, None, why));
            }
            let n = bytes.len() / frame;
            if out_len < RESULT_HEADER + 2 * n {
                let why = format!("NICE_Read of {out_len} bytes: the classes of {n} images take {} (raise NLB)", RESULT_HEADER + 2 * n);
                return Err(ctx.explain(Status::INVALID_FIELD, Some(48), why));
            }
            for img in bytes.chunks_exact(frame) {
                let (_, class) = net.run(img).map_err(|_| Status::INTERNAL_ERROR)?;
                tail.extend_from_slice(&(class as u16).to_le_bytes());
            }
            let timing = network_timing(shape, &layers, n, u.cnn_params).map_err(|_| Status::INTERNAL_ERROR)?;
            // The input and weights are staged in DDR by the transfers; NICE-C's load engine then reads them
            // over AXI (charged in the timing's per-layer load).
            let done = ctx.compute(done, u.cnn.ok_or(Status::INTERNAL_ERROR)?, 0, timing.cycles);
            (n as u64, done)
        }
        Job::Locate | Job::Fsr { .. } => return Err(Status::INTERNAL_ERROR),
    })
}

/// Bytes of a NICE_Read result before the op's tail: op u32, file size u64, inode u32, value u64, the inode's
/// generation u32, 4 reserved (zero) bytes. Size, inode and generation let the host library tell a result of the
/// file it opened from one of another file now at the same head LBA (a stale handle).
pub const RESULT_HEADER: usize = 32;

/// The file a result is about, as the firmware found it on flash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub size: u64,
    pub inode: u32,
    pub generation: u32,
}

/// The result block of a NICE_Read: the header ([`RESULT_HEADER`]), then the op's tail.
pub(crate) fn result_block(op: u32, file: Found, value: u64, tail: &[u8]) -> Vec<u8> {
    let mut res = Vec::with_capacity(RESULT_HEADER + tail.len());
    res.extend_from_slice(&op.to_le_bytes());
    res.extend_from_slice(&file.size.to_le_bytes());
    res.extend_from_slice(&file.inode.to_le_bytes());
    res.extend_from_slice(&value.to_le_bytes());
    res.extend_from_slice(&file.generation.to_le_bytes());
    res.extend_from_slice(&[0; 4]);
    res.extend_from_slice(tail);
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knn_block(bits: u8, query: &[i32]) -> Vec<u8> {
        let mut b = vec![OP_KNN as u8, bits];
        b.extend_from_slice(&(query.len() as u16).to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&[0, 0]);
        b.extend(query.iter().flat_map(|v| v.to_le_bytes()));
        b
    }

    #[test]
    fn a_query_value_outside_the_embedding_width_is_refused_at_bind() {
        let why = Job::parse(&knn_block(16, &[0, 40_000, 0, 0])).unwrap_err();
        assert!(why.contains("query value 40000 (block bytes 12..16)") && why.contains("-32768..=32767"), "{why}");
        assert!(Job::parse(&knn_block(16, &[-32768, 32767, 0, 0])).is_ok());
        assert!(Job::parse(&knn_block(32, &[i32::MIN, i32::MAX, 40_000, 0])).is_ok());
    }
}
