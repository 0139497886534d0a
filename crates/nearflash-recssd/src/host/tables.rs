//! Embedding tables on the device, as the host library sets them up: each table gets a page-aligned LBA range
//! starting at a multiple of the request modulus (so `table start + request id` pairs commands), its rows are
//! written (stored tables) or its range is mapped without data (generated tables, see
//! [`crate::table_dir::RowData`]), and it is registered with the firmware.
//!
//! Generated tables need the range mapped so that reads cost real flash time: the device is preconditioned
//! (untimed, no data) over every table's extent, which requires a fresh device. Stored tables are written
//! through ordinary NVMe Writes (timed) and need a device that stores data.

use super::HostError;
use crate::layout::{Placement, TableLayout};
use crate::params::RecssdParams;
use crate::quant::ElementFormat;
use crate::rowgen::GeneratedTable;
use crate::sls::{RowSource, TableView};
use crate::table_dir::{RowData, TableDescriptor, DESCRIPTOR_BYTES};
use nearflash_core::nvme::DataBuf;
use nearflash_core::FillPattern;
use nearflash_core::nvme::{opcode, Sqe};
use nearflash_core::Device;
use std::sync::Arc;

/// Row values of a table as the host knows them (for its DRAM copy, partition rows and decoding reads).
#[derive(Debug, Clone)]
pub enum HostRows {
    /// Row-major `rows x dim` values.
    Array(Arc<Vec<f32>>, usize, usize),
    /// Computed from a seed.
    Generated(GeneratedTable),
}

impl RowSource for HostRows {
    fn rows(&self) -> usize {
        match self {
            HostRows::Array(_, r, _) => *r,
            HostRows::Generated(g) => g.rows(),
        }
    }
    fn dim(&self) -> usize {
        match self {
            HostRows::Array(_, _, d) => *d,
            HostRows::Generated(g) => g.dim(),
        }
    }
    fn row<'a>(&'a self, r: usize, scratch: &'a mut [f32]) -> &'a [f32] {
        match self {
            HostRows::Array(v, _, d) => &v[r * d..(r + 1) * d],
            HostRows::Generated(g) => g.row(r, scratch),
        }
    }
    fn prefetch(&self, r: usize) {
        if let HostRows::Array(v, rows, d) = self {
            if let Ok(tv) = TableView::new(v, *rows, *d) {
                tv.prefetch(r);
            }
        }
    }
}

/// What a table holds.
#[derive(Debug, Clone)]
pub enum TableData {
    /// These values (row-major), written to the device.
    Values(Vec<f32>),
    /// Rows generated from `seed` and the table's id; the device range is mapped but stores nothing.
    Generated { seed: u64 },
}

/// A table to place.
#[derive(Debug, Clone)]
pub struct TableSpec {
    pub rows: u64,
    pub dim: u32,
    pub data: TableData,
    /// Stored element width: 4 fp32, 2 fp16, 1 int8 (see [`crate::quant`]; int8 takes the scale that maps the
    /// table's largest magnitude to 127). The host's copy holds the values the stored rows decode to.
    pub attribute_bytes: u32,
}

/// A table on the device.
#[derive(Debug, Clone)]
pub struct DeviceTable {
    /// Table id (position in the model; the SSD cache key's table field).
    pub id: u32,
    pub layout: TableLayout,
    pub rows: HostRows,
    /// The device stores the values (else they are generated on both sides).
    pub stored: bool,
}

/// The model's tables on one device.
#[derive(Debug, Clone)]
pub struct DeviceTables {
    pub tables: Vec<DeviceTable>,
    /// Request-id modulus of the firmware.
    pub modulus: u64,
}

impl DeviceTables {
    /// Lays out `specs` from LBA 0 with `placement`, writes or maps them on `dev`, and registers them with the
    /// attached RecSSD firmware, using I/O queue `qid` for the commands.
    pub fn place(
        dev: &mut Device,
        specs: Vec<TableSpec>,
        placement: Placement,
        params: &RecssdParams,
        qid: u16,
    ) -> Result<Self, HostError> {
        let modulus = params.request_modulus;
        let lba_bytes = dev.lba_bytes() as u32;
        let page_bytes = dev.config().nand.page_size.0 as u32;
        let mut start = 0u64;
        let mut tables = Vec::with_capacity(specs.len());
        for (id, spec) in specs.into_iter().enumerate() {
            let id = u32::try_from(id).map_err(|_| HostError::Invalid("too many tables".into()))?;
            let bad = |e: String| HostError::Invalid(format!("table {id}: {e}"));
            if !matches!(spec.attribute_bytes, 1 | 2 | 4) {
                return Err(bad(format!("attribute_bytes {} is not 4 (fp32), 2 (fp16) or 1 (int8)", spec.attribute_bytes)));
            }
            let mut layout = TableLayout::new(start, spec.rows, spec.dim, spec.attribute_bytes, lba_bytes, page_bytes, placement)
                .map_err(|e| bad(e.to_string()))?;
            let (rows, dim) = (spec.rows as usize, spec.dim as usize);
            let (host_rows, stored) = match spec.data {
                TableData::Values(mut v) => {
                    TableView::new(&v, rows, dim).map_err(|e| bad(e.to_string()))?;
                    if spec.attribute_bytes == 1 {
                        let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
                        layout = layout.with_int8_scale(ElementFormat::int8_scale_for(max)).map_err(|e| bad(e.to_string()))?;
                    }
                    let format = layout.format().map_err(|e| bad(e.to_string()))?;
                    v.chunks_mut(dim).for_each(|r| format.round_trip(r));
                    (HostRows::Array(Arc::new(v), rows, dim), true)
                }
                TableData::Generated { seed } => {
                    let g = GeneratedTable::new(seed, id, rows, dim).map_err(|e| bad(e.to_string()))?;
                    if spec.attribute_bytes == 1 {
                        layout = layout.with_int8_scale(g.int8_scale()).map_err(|e| bad(e.to_string()))?;
                    }
                    let format = layout.format().map_err(|e| bad(e.to_string()))?;
                    (HostRows::Generated(g.with_format(format)), false)
                }
            };
            start = layout.end_lba().div_ceil(modulus) * modulus;
            tables.push(DeviceTable { id, layout, rows: host_rows, stored });
        }
        let end = tables.last().map_or(0, |t| t.layout.end_lba());
        let lbas = dev.namespace().lbas;
        if end > lbas {
            return Err(HostError::Invalid(format!(
                "the tables need {:.1} GiB of LBAs, the device has {:.1} GiB",
                (end * u64::from(lba_bytes)) as f64 / f64::from(1u32 << 30),
                (lbas * u64::from(lba_bytes)) as f64 / f64::from(1u32 << 30)
            )));
        }
        if !dev.has_queue(qid) {
            dev.create_queue_pair(qid, 64)?;
        }
        let me = Self { tables, modulus };
        if me.tables.iter().any(|t| !t.stored) {
            // Map every table's extent (whole page groups, from LBA 0) without storing data.
            let spp = u64::from(page_bytes / lba_bytes);
            let fraction = ((end.div_ceil(spp) + 1) as f64 / (lbas / spp) as f64).min(1.0);
            dev.precondition(fraction, FillPattern::Sequential, 0.0, 1).map_err(|e| {
                HostError::Invalid(format!("mapping generated tables needs a fresh device: {e}"))
            })?;
        }
        for t in me.tables.iter().filter(|t| t.stored) {
            write_table(dev, t, qid)?;
        }
        for t in &me.tables {
            me.register(dev, t, params.register_opcode, qid)?;
        }
        Ok(me)
    }

    fn register(&self, dev: &mut Device, t: &DeviceTable, op: u8, qid: u16) -> Result<(), HostError> {
        let data = match t.rows {
            HostRows::Generated(g) => RowData::Generated { seed: g.seed() },
            HostRows::Array(..) => RowData::Stored,
        };
        let mut block = vec![0u8; dev.lba_bytes() as usize];
        block[..DESCRIPTOR_BYTES].copy_from_slice(&TableDescriptor { table_id: t.id, layout: t.layout, data }.encode());
        let sqe = Sqe { opcode: op, nsid: 1, cdw10: t.layout.start_lba() as u32, ..Sqe::default() };
        let d = dev.execute(qid, sqe, DataBuf::ToDevice(&block))?;
        HostError::check_on(dev, qid, d.cid, d.status, d.dw0, &format!("registering table {}", t.id))
    }

    /// Tables.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// No tables.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}

/// Writes a stored table page by page (as many pages per Write as MDTS allows), then checks that the device keeps
/// data by reading the first block back.
fn write_table(dev: &mut Device, t: &DeviceTable, qid: u16) -> Result<(), HostError> {
    let HostRows::Array(values, rows, dim) = &t.rows else { return Ok(()) };
    let tv = TableView::new(values, *rows, *dim).map_err(HostError::invalid)?;
    let l = &t.layout;
    let page_bytes = l.page_bytes() as usize;
    let lbas_per_page = l.lbas_per_page();
    let per_cmd = (u64::from(dev.namespace().max_lbas) / lbas_per_page).max(1);
    let mut buf = vec![0u8; per_cmd as usize * page_bytes];
    let mut page = 0u64;
    while page < l.pages() {
        let n = per_cmd.min(l.pages() - page);
        for k in 0..n {
            let dst = &mut buf[k as usize * page_bytes..(k as usize + 1) * page_bytes];
            l.render_page(&tv, page + k, dst).map_err(HostError::invalid)?;
        }
        let nlb = (n * lbas_per_page) as u32;
        let sqe = Sqe::rw(opcode::WRITE, 0, l.page_lba(page), nlb);
        let d = dev.execute(qid, sqe, DataBuf::ToDevice(&buf[..n as usize * page_bytes]))?;
        HostError::check_on(dev, qid, d.cid, d.status, d.dw0, &format!("writing table {}", t.id))?;
        page += n;
    }
    let d = dev.execute(qid, Sqe { opcode: opcode::FLUSH, nsid: 1, ..Sqe::default() }, DataBuf::None)?;
    HostError::check_on(dev, qid, d.cid, d.status, d.dw0, "flushing tables")?;
    let mut first = vec![0u8; dev.lba_bytes() as usize];
    let d = dev.execute(qid, Sqe::rw(opcode::READ, 0, l.start_lba(), 1), DataBuf::FromDevice(&mut first))?;
    HostError::check_on(dev, qid, d.cid, d.status, d.dw0, "reading a table back")?;
    let mut want = vec![0u8; page_bytes];
    l.render_page(&tv, 0, &mut want).map_err(HostError::invalid)?;
    if first[..] != want[..first.len()] {
        return Err(HostError::Invalid(
            "stored tables need a device that keeps data (create it with materialise=True), or use generated tables"
                .into(),
        ));
    }
    Ok(())
}
