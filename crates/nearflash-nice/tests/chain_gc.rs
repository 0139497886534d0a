//! Property test of the OOB list under GC: random GC moves (old copies erased and reused, or left readable) and
//! host overwrites, then every file is located in two reads and streamed to exactly its newest pages.

use std::collections::HashMap;

use nearflash_nice::chain::{locate, Mapping, PageReader};
use nearflash_nice::oob::{chain_records, OobRecord};
use proptest::prelude::*;

#[derive(Default)]
struct Model {
    map: HashMap<u64, u64>,
    /// PPN -> (OOB record as programmed, data version).
    flash: HashMap<u64, (OobRecord, u32)>,
    version: HashMap<u64, u32>,
    free: Vec<u64>,
    next: u64,
}

impl Mapping for Model {
    fn ppn(&self, lpn: u64) -> Option<u64> {
        self.map.get(&lpn).copied()
    }
}

impl Model {
    fn alloc(&mut self) -> u64 {
        self.free.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next
        })
    }
    /// Leaves the old copy readable or erases it (its PPN then goes to the next allocation).
    fn retire(&mut self, old: u64, erase: bool) {
        if erase {
            self.flash.remove(&old);
            self.free.push(old);
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Gc { file: usize, page: usize, erase: bool },
    Overwrite { file: usize, page: usize, erase: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..64, 0usize..64, any::<bool>()).prop_map(|(file, page, erase)| Op::Gc { file, page, erase }),
        (0usize..64, 0usize..64, any::<bool>()).prop_map(|(file, page, erase)| Op::Overwrite { file, page, erase }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn every_file_streams_its_newest_pages_after_gc(
        sizes in proptest::collection::vec(1usize..12, 1..8),
        ops in proptest::collection::vec(op(), 0..120),
    ) {
        let mut m = Model::default();
        // Files with scattered LPNs (file f, page i -> LPN 1000 f + 3 i).
        let files: Vec<Vec<u64>> = sizes.iter().enumerate().map(|(f, &n)| (0..n).map(|i| 1000 * f as u64 + 3 * i as u64).collect()).collect();
        for (f, lpns) in files.iter().enumerate() {
            let ppns: Vec<u64> = lpns.iter().map(|_| m.alloc()).collect();
            for (k, r) in chain_records(f as u32 + 12, 0, 0, lpns, &ppns).unwrap().into_iter().enumerate() {
                m.flash.insert(ppns[k], (r, 0));
                m.map.insert(lpns[k], ppns[k]);
                m.version.insert(lpns[k], 0);
            }
        }
        let inode_of = |ino: u32| files.get((ino - 12) as usize).cloned();
        let mut chains: Vec<_> = files
            .iter()
            .map(|l| locate(l[0], &m, &mut Model::default_reader(&m), &mut |i| inode_of(i)).unwrap().1)
            .collect();
        for op in ops {
            match op {
                Op::Gc { file, page, erase } => {
                    let f = file % files.len();
                    let lpn = files[f][page % files[f].len()];
                    let old = m.map[&lpn];
                    let copy = m.flash[&old];
                    let new = m.alloc();
                    m.flash.insert(new, copy);
                    m.map.insert(lpn, new);
                    m.retire(old, erase);
                    // Lazy repair: GC does not tell the chain; walks must detect erased/reused targets.
                }
                Op::Overwrite { file, page, erase } => {
                    let f = file % files.len();
                    let i = page % files[f].len();
                    let lpn = files[f][i];
                    let old = m.map[&lpn];
                    let new = m.alloc();
                    let v = m.version[&lpn] + 1;
                    m.version.insert(lpn, v);
                    m.map.insert(lpn, new);
                    let ppns: Vec<u64> = files[f].iter().map(|l| m.map[l]).collect();
                    let rec = chain_records(f as u32 + 12, 0, 0, &files[f], &ppns).unwrap()[i];
                    m.flash.insert(new, (rec, v));
                    m.retire(old, erase);
                    chains[f].page_moved(i);
                }
            }
        }
        for (f, chain) in chains.iter_mut().enumerate() {
            let (located, _) = locate(files[f][0], &m, &mut Model::default_reader(&m), &mut |i| inode_of(i)).unwrap();
            prop_assert_eq!(located.flash_reads, 2);
            prop_assert_eq!(located.inode, f as u32 + 12);
            let w = chain.walk(&m, &mut m.default_reader()).unwrap();
            let newest: Vec<u64> = files[f].iter().map(|l| m.map[l]).collect();
            // Each page read holds the file's page with its newest data (the newest PPN, or a GC-moved page's old
            // copy not erased yet, which holds the same bytes).
            prop_assert_eq!(w.ppns.len(), newest.len());
            for (k, &p) in w.ppns.iter().enumerate() {
                prop_assert_eq!(u64::from(m.flash[&p].0.lpn), files[f][k]);
                prop_assert_eq!(m.flash[&p].1, m.version[&files[f][k]], "stale data streamed");
            }
            let n = files[f].len() as u64;
            prop_assert!(w.page_reads <= n + w.mismatches);
            // Rebuilt lists stream with one mapping lookup and no wasted read.
            let recs = chain.rebuild(&m, 0, 0).unwrap();
            for (k, r) in recs.into_iter().enumerate() {
                let p = newest[k];
                let v = m.flash[&p].1;
                m.flash.insert(p, (r, v));
            }
            let w2 = chain.walk(&m, &mut m.default_reader()).unwrap();
            prop_assert_eq!(&w2.ppns, &newest);
            prop_assert_eq!((w2.page_reads, w2.mismatches, w2.map_lookups), (n, 0, 1));
        }
    }
}

/// A reader over a snapshot of the model's flash (walks borrow the map at the same time).
struct Snapshot(HashMap<u64, (OobRecord, u32)>);
impl PageReader for Snapshot {
    fn read_oob(&mut self, ppn: u64) -> Option<OobRecord> {
        // Through the byte encoding, as the firmware reads the spare area.
        self.0.get(&ppn).and_then(|(r, _)| OobRecord::decode(&r.encode()).ok())
    }
}
impl Model {
    fn default_reader(&self) -> Snapshot {
        Snapshot(self.flash.clone())
    }
}

#[test]
fn locate_refuses_pages_that_are_not_a_files_first() {
    let mut m = Model::default();
    let lpns = [5u64, 6, 7];
    let ppns = [50u64, 60, 70];
    for (k, r) in chain_records(12, 0, 0, &lpns, &ppns).unwrap().into_iter().enumerate() {
        m.flash.insert(ppns[k], (r, 0));
        m.map.insert(lpns[k], ppns[k]);
    }
    let mut snap = m.default_reader();
    let mut inode = |i: u32| (i == 12).then(|| lpns.to_vec());
    assert!(locate(5, &m, &mut snap, &mut inode).is_ok());
    assert!(locate(6, &m, &mut snap, &mut inode).is_err(), "middle page");
    assert!(locate(99, &m, &mut snap, &mut inode).is_err(), "unmapped");
    // The inode now starts elsewhere (file changed since the list was written).
    assert!(locate(5, &m, &mut snap, &mut |_| Some(vec![6, 7])).is_err());
}
