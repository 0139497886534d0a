//! `scan` and `filter_sum` over columnar lineitem pages ([`crate::lineitem::columnar`]): `col_scan` and
//! `col_filter_sum` take the same conditions, projection and product as their row-layout twins and give the same
//! answers, but read only the columns they name, as dense typed arrays: each condition is one branch-free pass
//! over a column (the compiler vectorises it) into a selection mask, then only the selected rows are touched.
//!
//! Input as the device sees it: the named columns in record order ([`ColumnarKernel::columns`]), one page each per
//! row group, interleaved group by group (`g: col_0, col_1, ...`); a Map task takes whole groups (its chunk's
//! `first_page` is a multiple of the column count). The host path ([`run_columnar`]) reads the same pages straight
//! from the table's column regions without building that stream.

use super::scan::{Aggregate, Condition, FilterSumParams, ScanParams};
use super::selection::Selection;
use super::{Chunk, Kernel, Output, Partial, RunReport};
use crate::error::{invalid, Result};
use crate::lineitem::columnar::{kind_width, value, ColumnarLayout};
use crate::lineitem::{Field, FieldKind};
use crate::pages::PageLayout;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Parameters of `col_scan`: `scan`'s, plus the table's row count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColScanParams {
    pub rows: u64,
    #[serde(default = "scan_conditions")]
    pub conditions: Vec<Condition>,
    #[serde(default = "scan_projection")]
    pub projection: Vec<Field>,
}

impl ColScanParams {
    #[cfg(test)]
    fn default_for_tests() -> Self {
        Self { rows: 0, conditions: scan_conditions(), projection: scan_projection() }
    }
}

/// Parameters of `col_filter_sum`: `filter_sum`'s (TPC-H Q6 by default), plus the table's row count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColFilterSumParams {
    pub rows: u64,
    #[serde(default = "q6_conditions")]
    pub conditions: Vec<Condition>,
    #[serde(default = "q6_product")]
    pub product: Vec<Field>,
}

fn scan_conditions() -> Vec<Condition> {
    ScanParams::default().conditions
}
fn scan_projection() -> Vec<Field> {
    ScanParams::default().projection
}
fn q6_conditions() -> Vec<Condition> {
    FilterSumParams::default().conditions
}
fn q6_product() -> Vec<Field> {
    FilterSumParams::default().product
}

#[derive(Debug, Clone)]
enum Finish {
    /// Projected columns (indexes into `columns`).
    Project(Vec<usize>),
    /// Columns whose product is summed.
    Sum(Vec<usize>),
}

/// A condition on column `col` (index into `columns`), inclusive bounds in stored units.
#[derive(Debug, Clone, Copy)]
struct ColCondition {
    col: usize,
    kind: FieldKind,
    min: i64,
    max: i64,
}

/// `col_scan` or `col_filter_sum` over one columnar table.
#[derive(Debug, Clone)]
pub struct ColumnarKernel {
    name: &'static str,
    table: ColumnarLayout,
    columns: Vec<Field>,
    conditions: Vec<ColCondition>,
    finish: Finish,
}

fn integer(f: Field) -> Result<Field> {
    if f.kind() == FieldKind::Text {
        return Err(invalid(format!("columnar kernels take integer columns, {} is text", f.name())));
    }
    Ok(f)
}

impl ColumnarKernel {
    fn new(
        name: &'static str,
        rows: u64,
        conditions: &[Condition],
        outputs: &[Field],
        layout: PageLayout,
        sum: bool,
    ) -> Result<Self> {
        let table = ColumnarLayout::new(rows, layout.page_size(), 1)?;
        if outputs.is_empty() {
            return Err(invalid(format!("{name} needs at least one {}", if sum { "product column" } else { "projected column" })));
        }
        let mut columns: Vec<Field> = conditions.iter().map(|c| c.field).chain(outputs.iter().copied()).collect();
        for f in &columns {
            integer(*f)?;
        }
        columns.sort_by_key(|f| f.offset());
        columns.dedup();
        let idx = |f: Field| columns.iter().position(|&c| c == f).expect("named column");
        let conditions = conditions
            .iter()
            .map(|c| ColCondition {
                col: idx(c.field),
                kind: c.field.kind(),
                min: c.min.unwrap_or(i64::MIN),
                max: c.max.unwrap_or(i64::MAX),
            })
            .collect();
        let outs = outputs.iter().map(|&f| idx(f)).collect();
        let finish = if sum { Finish::Sum(outs) } else { Finish::Project(outs) };
        Ok(Self { name, table, columns, conditions, finish })
    }

    pub fn scan(p: &ColScanParams, layout: PageLayout) -> Result<Self> {
        Self::new("col_scan", p.rows, &p.conditions, &p.projection, layout, false)
    }

    pub fn filter_sum(p: &ColFilterSumParams, layout: PageLayout) -> Result<Self> {
        Self::new("col_filter_sum", p.rows, &p.conditions, &p.product, layout, true)
    }

    /// Rows of the table the kernel was built for.
    pub fn rows(&self) -> u64 {
        self.table.rows
    }

    /// The columns the kernel reads, in record order (the order of each group's pages in its input).
    pub fn columns(&self) -> &[Field] {
        &self.columns
    }

    /// Maps groups `first..first + n`; `col(g, c)` gives column `c`'s bytes of group `g` (at least its rows).
    fn map_groups<'a>(&self, first: u64, n: u64, col: impl Fn(u64, usize) -> &'a [u8]) -> Result<Partial> {
        let mut mask = vec![0u8; self.table.rows_per_group()];
        let mut idx: Vec<u32> = Vec::with_capacity(mask.len());
        let mut cols: Vec<&'a [u8]> = Vec::with_capacity(self.columns.len());
        let (mut scanned, mut items, mut bytes, mut sum) = (0u64, 0u64, Vec::new(), 0i128);
        for g in first..first + n {
            let rows = self.table.rows_in_group(g)?;
            cols.clear();
            cols.extend((0..self.columns.len()).map(|c| col(g, c)));
            let sel = &mut mask[..rows];
            sel.fill(1);
            for c in &self.conditions {
                keep(sel, cols[c.col], c.kind, c.min, c.max)?;
            }
            scanned += rows as u64;
            // the selected rows first, then their values: independent loads the core overlaps (the values of
            // the output columns are mostly cache misses, one line per selected row)
            idx.clear();
            for_selected(sel, |i| idx.push(i as u32));
            items += idx.len() as u64;
            match &self.finish {
                Finish::Project(p) => {
                    let widths: Vec<(usize, &[u8])> = p.iter().map(|&c| (self.columns[c].width(), cols[c])).collect();
                    bytes.reserve(idx.len() * widths.iter().map(|w| w.0).sum::<usize>());
                    for &i in &idx {
                        for &(w, col) in &widths {
                            push_value(&mut bytes, col, i as usize, w);
                        }
                    }
                }
                Finish::Sum(p) => {
                    for &i in &idx {
                        sum += p.iter().map(|&c| i128::from(value(cols[c], i as usize, self.columns[c].kind()))).product::<i128>();
                    }
                }
            }
        }
        Ok(match self.finish {
            Finish::Project(_) => {
                let pages = n * self.columns.len() as u64;
                Partial::Selection(Selection::single(first * self.columns.len() as u64, pages, scanned, items, bytes))
            }
            Finish::Sum(_) => Partial::Aggregate(Aggregate { scanned, matched: items, sum }),
        })
    }
}

/// Appends value `i` (`w` bytes) of a column: fixed-size copies for the integer widths (no memmove call).
#[inline(always)]
fn push_value(out: &mut Vec<u8>, col: &[u8], i: usize, w: usize) {
    match w {
        8 => out.extend_from_slice(&<[u8; 8]>::try_from(&col[i * 8..i * 8 + 8]).expect("8 bytes")),
        4 => out.extend_from_slice(&<[u8; 4]>::try_from(&col[i * 4..i * 4 + 4]).expect("4 bytes")),
        1 => out.push(col[i]),
        _ => out.extend_from_slice(&col[i * w..(i + 1) * w]),
    }
}

/// Clears `sel[i]` where value `i` of `col` is outside `[min, max]`: one branch-free pass the compiler vectorises,
/// with AVX2 where the CPU has it (the build targets baseline x86-64, whose SSE2 packs compare results slowly).
fn keep(sel: &mut [u8], col: &[u8], kind: FieldKind, min: i64, max: i64) -> Result<()> {
    let need = sel.len() * kind_width(kind);
    let col = col.get(..need).ok_or_else(|| invalid("columnar page shorter than its rows"))?;
    if kind == FieldKind::Text {
        return Err(invalid("columnar conditions take integer columns"));
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above)
        unsafe { keep_avx2(sel, col, kind, min, max) };
        return Ok(());
    }
    keep_body(sel, col, kind, min, max);
    Ok(())
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn keep_avx2(sel: &mut [u8], col: &[u8], kind: FieldKind, min: i64, max: i64) {
    keep_body(sel, col, kind, min, max)
}

#[inline(always)]
fn keep_body(sel: &mut [u8], col: &[u8], kind: FieldKind, min: i64, max: i64) {
    // `read` is a generic closure, not a function pointer, so each pass is monomorphised and vectorised
    #[inline(always)]
    fn pass<const W: usize, T: PartialOrd + Copy>(sel: &mut [u8], col: &[u8], lo: T, hi: T, read: impl Fn([u8; W]) -> T) {
        for (s, v) in sel.iter_mut().zip(col.chunks_exact(W)) {
            let x = read(v.try_into().expect("chunk of W bytes"));
            *s &= ((x >= lo) & (x <= hi)) as u8;
        }
    }
    // bounds narrowed to the column's type; a range outside it selects nothing
    fn narrow(min: i64, max: i64, lo: i64, hi: i64) -> Option<(i64, i64)> {
        (min <= hi && max >= lo && min <= max).then(|| (min.max(lo), max.min(hi)))
    }
    match kind {
        FieldKind::I64 | FieldKind::U64 => pass::<8, i64>(sel, col, min, max, i64::from_le_bytes),
        FieldKind::I32 => match narrow(min, max, i32::MIN.into(), i32::MAX.into()) {
            Some((lo, hi)) => pass::<4, i32>(sel, col, lo as i32, hi as i32, i32::from_le_bytes),
            None => sel.fill(0),
        },
        FieldKind::U8 => match narrow(min, max, 0, 255) {
            Some((lo, hi)) => pass::<1, u8>(sel, col, lo as u8, hi as u8, |b| b[0]),
            None => sel.fill(0),
        },
        FieldKind::Text => {}
    }
}

/// Calls `f` for every selected row, skipping eight clear mask bytes at a time.
#[inline]
fn for_selected(sel: &[u8], mut f: impl FnMut(usize)) {
    for (w, chunk) in sel.chunks(8).enumerate() {
        if chunk.len() == 8 && u64::from_ne_bytes(chunk.try_into().expect("8 bytes")) == 0 {
            continue;
        }
        for (j, &s) in chunk.iter().enumerate() {
            if s != 0 {
                f(w * 8 + j);
            }
        }
    }
}

impl Kernel for ColumnarKernel {
    fn name(&self) -> &str {
        self.name
    }
    fn layout(&self) -> PageLayout {
        PageLayout::new(self.table.page_size).expect("checked page size")
    }
    fn empty(&self) -> Partial {
        match self.finish {
            Finish::Project(_) => Partial::Selection(Selection::default()),
            Finish::Sum(_) => Partial::Aggregate(Aggregate::default()),
        }
    }
    fn map(&self, chunk: Chunk<'_>) -> Result<Partial> {
        let (ps, ncol) = (self.table.page_size, self.columns.len());
        let group_bytes = ps * ncol;
        if !chunk.bytes.len().is_multiple_of(group_bytes) || !chunk.first_page.is_multiple_of(ncol as u64) {
            return Err(invalid(format!(
                "{} maps whole row groups of {ncol} pages: chunk of {} B from page {}",
                self.name,
                chunk.bytes.len(),
                chunk.first_page
            )));
        }
        let first = chunk.first_page / ncol as u64;
        let n = (chunk.bytes.len() / group_bytes) as u64;
        self.map_groups(first, n, |g, c| {
            let at = (g - first) as usize * group_bytes + c * ps;
            &chunk.bytes[at..at + ps]
        })
    }
    fn finish(&self, p: Partial) -> Result<Output> {
        match (&self.finish, p) {
            (Finish::Project(_), p) => Selection::finish_partial(self.name, p),
            (Finish::Sum(_), Partial::Aggregate(a)) => Ok(Output::Aggregate(a)),
            (_, other) => Err(other.wrong_kind(self.name)),
        }
    }
}

/// The table's layout from its header, checked against what the kernel was built for.
fn table_of(kernel: &ColumnarKernel, table: &[u8]) -> Result<ColumnarLayout> {
    let l = ColumnarLayout::from_table(table)?;
    if l.rows != kernel.table.rows || l.page_size != kernel.table.page_size {
        return Err(invalid(format!(
            "{} was built for {} rows in {} B pages, the table has {} rows in {} B pages",
            kernel.name, kernel.table.rows, kernel.table.page_size, l.rows, l.page_size
        )));
    }
    Ok(l)
}

/// Builds the interleaved input stream of `kernel` from a table (what the device's extents name, in order).
pub fn columnar_stream(kernel: &ColumnarKernel, table: &[u8]) -> Result<Vec<u8>> {
    let table_layout = table_of(kernel, table)?;
    let ps = table_layout.page_size;
    let starts: Vec<u64> = kernel.columns.iter().map(|&f| table_layout.region(f).first_page).collect();
    let mut out = Vec::with_capacity(table_layout.groups() as usize * starts.len() * ps);
    for g in 0..table_layout.groups() {
        for s in &starts {
            let at = ((s + g) as usize) * ps;
            out.extend_from_slice(&table[at..at + ps]);
        }
    }
    Ok(out)
}

/// The host path over a whole columnar table: Map tasks of `groups_per_task` row groups on the rayon pool, each
/// reading only its named columns' pages, merged pairwise. `input_bytes` counts the pages read.
pub fn run_columnar(kernel: &ColumnarKernel, table: &[u8], groups_per_task: u64) -> Result<RunReport> {
    let table_layout = table_of(kernel, table)?;
    if groups_per_task == 0 {
        return Err(invalid("groups_per_task must be at least 1"));
    }
    let ps = table_layout.page_size;
    let starts: Vec<usize> =
        kernel.columns.iter().map(|&f| table_layout.region(f).first_page as usize * ps).collect();
    let groups = table_layout.groups();
    let tasks: Vec<u64> = (0..groups.div_ceil(groups_per_task)).collect();
    let (acc, partial_bytes) = tasks
        .into_par_iter()
        .map(|t| {
            let first = t * groups_per_task;
            let n = groups_per_task.min(groups - first);
            let p = kernel.map_groups(first, n, |g, c| &table[starts[c] + g as usize * ps..][..ps])?;
            let len = p.encoded_len() as u64;
            Ok::<_, crate::IssdError>((p, len))
        })
        .try_reduce(
            || (kernel.empty(), 0),
            |(mut a, la), (b, lb)| {
                kernel.merge(&mut a, b)?;
                Ok((a, la + lb))
            },
        )?;
    let output = kernel.finish(acc)?;
    let output_bytes = output.encoded_len() as u64;
    let input_bytes = groups * kernel.columns.len() as u64 * ps as u64;
    Ok(RunReport { output, chunks: groups.div_ceil(groups_per_task), input_bytes, partial_bytes, output_bytes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::scan::{FilterSumKernel, ScanKernel};
    use crate::kernel::{run_chunked, run_serial};
    use crate::lineitem::columnar::columnar_from_records;
    use crate::lineitem::{generate_pages, generate_records, CommentPool, LineitemSpec};

    const ROWS: u64 = 5000;

    fn data() -> (Vec<u8>, Vec<u8>, ColumnarLayout) {
        let spec = LineitemSpec::rows(ROWS).with_comment_pool(CommentPool::Compact);
        let rows = generate_pages(&spec, PageLayout::new(8192).unwrap()).unwrap();
        let l = ColumnarLayout::new(ROWS, 8192, 3).unwrap();
        (rows, columnar_from_records(l, &generate_records(&spec).unwrap()).unwrap(), l)
    }

    #[test]
    fn answers_equal_the_row_layout_on_host_and_device_streams() {
        let (rows, table, _) = data();
        let page = PageLayout::new(8192).unwrap();
        let wide = ScanParams {
            conditions: vec![
                Condition { field: Field::PartKey, min: Some(500), max: Some(40_000) },
                Condition { field: Field::CommentLen, min: Some(20), max: None },
            ],
            projection: vec![Field::Quantity, Field::RowId, Field::ShipDate],
        };
        for scan in [ScanParams::default(), wide] {
            let col = ColumnarKernel::scan(&ColScanParams { rows: ROWS, conditions: scan.conditions.clone(), projection: scan.projection.clone() }, page).unwrap();
            let reference = run_serial(&ScanKernel::new(&scan, page).unwrap(), &rows).unwrap().output;
            assert_eq!(run_columnar(&col, &table, 2).unwrap().output, reference);
            let stream = columnar_stream(&col, &table).unwrap();
            let n = col.columns().len();
            assert_eq!(run_chunked(&col, &stream, n).unwrap().output, reference);
            assert_eq!(run_chunked(&col, &stream, 3 * n).unwrap().output, reference);
        }
        let q6 = FilterSumParams::default();
        let col = ColumnarKernel::filter_sum(&ColFilterSumParams { rows: ROWS, conditions: q6.conditions.clone(), product: q6.product.clone() }, page).unwrap();
        let reference = run_serial(&FilterSumKernel::new(&q6, page).unwrap(), &rows).unwrap().output;
        let Output::Aggregate(a) = &reference else { panic!("aggregate") };
        assert!(a.matched > 0);
        assert_eq!(run_columnar(&col, &table, 1).unwrap().output, reference);
        assert_eq!(col.columns(), &[Field::ExtendedPrice, Field::Quantity, Field::Discount, Field::ShipDate]);
        assert_eq!(run_columnar(&col, &table, 1).unwrap().input_bytes, 5 * 4 * 8192);
    }

    proptest::proptest! {
        /// Arbitrary bytes as a table or as a Map chunk: an answer or an error, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..1200), first in 0u64..8) {
            let page = PageLayout::new(64).unwrap();
            let k = ColumnarKernel::filter_sum(&ColFilterSumParams { rows: 20, conditions: q6_conditions(), product: q6_product() }, page).unwrap();
            let _ = k.map(Chunk::new(first * 4, &bytes));
            let _ = run_columnar(&k, &bytes, 1);
            let _ = ColumnarLayout::from_table(&bytes);
        }
    }

    #[test]
    fn out_of_type_bounds_select_nothing_and_bad_inputs_are_errors() {
        let (_, table, _) = data();
        let page = PageLayout::new(8192).unwrap();
        let none = ColScanParams {
            rows: ROWS,
            conditions: vec![Condition { field: Field::Quantity, min: Some(i64::from(i32::MAX) + 1), max: None }],
            projection: vec![Field::Quantity],
        };
        let k = ColumnarKernel::scan(&none, page).unwrap();
        let Output::Selection(s) = run_columnar(&k, &table, 4).unwrap().output else { panic!() };
        assert_eq!((s.scanned, s.items), (ROWS, 0));
        let text = ColScanParams { projection: vec![Field::Comment], ..none.clone() };
        assert!(ColumnarKernel::scan(&text, page).is_err());
        assert!(ColumnarKernel::scan(&ColScanParams { projection: vec![], ..none.clone() }, page).is_err());
        assert!(run_columnar(&k, &table[..table.len() - 1], 4).is_err());
        assert!(run_columnar(&k, &table, 0).is_err());
        let other = ColumnarKernel::scan(&ColScanParams { rows: ROWS + 1, ..none.clone() }, page).unwrap();
        assert!(run_columnar(&other, &table, 4).is_err());
        // a chunk that is not whole groups, or starts inside one, or lies past the table
        let two = ColumnarKernel::scan(&ColScanParams { rows: ROWS, ..ColScanParams::default_for_tests() }, page).unwrap();
        assert_eq!(two.columns().len(), 2);
        assert!(two.map(Chunk::new(0, &table[..8192])).is_err());
        assert!(two.map(Chunk::new(1, &table[..2 * 8192])).is_err());
        assert!(two.map(Chunk::new(100, &table[..2 * 8192])).is_err());
        assert!(two.map(Chunk::new(0, &table[..2 * 8192])).is_ok());
    }
}
