//! Index behaviour: recall of both graph kinds on a small clustered set against brute force, every metric and
//! dtype, the file format's round trip and its refusal of damaged bytes.

use nearflash_ndsearch::{Dtype, Index, Kind, Metric, Params, Rows};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn clustered(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let centres: Vec<Vec<f32>> = (0..16).map(|_| (0..dim).map(|_| rng.gen_range(-5.0..5.0)).collect()).collect();
    (0..n).flat_map(|i| {
        let c = centres[i % 16].clone();
        c.into_iter().map(|x| x + rng.gen_range(-1.0f32..1.0)).collect::<Vec<_>>()
    })
    .collect()
}

fn params(kind: Kind, metric: Metric, dtype: Dtype, dim: usize) -> Params {
    Params { kind, metric, dtype, dim, r: if kind == Kind::Hnsw { 12 } else { 24 }, ef_construction: 80, alpha: 1.2, seed: 7 }
}

fn brute(idx: &Index, q: &Rows, k: usize) -> Vec<Vec<u32>> {
    let dim = idx.params().dim;
    (0..q.len() / dim)
        .map(|i| {
            let mut d: Vec<(f32, u32)> = (0..idx.len() as u32)
                .map(|v| (nearflash_ndsearch::distance::distance(idx.params().metric, q.row(i, dim), idx.vector(v)), v))
                .collect();
            d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            d.iter().take(k).map(|x| x.1).collect()
        })
        .collect()
}

fn recall(idx: &Index, q: Rows, k: usize, ef: usize) -> f64 {
    let mut qp = q.clone();
    idx.prepare(&mut qp, "q").unwrap();
    let truth = brute(idx, &qp, k);
    let (_, ids) = idx.search(q, k, ef).unwrap();
    let hits: usize = truth
        .iter()
        .enumerate()
        .map(|(i, t)| t.iter().filter(|v| ids[i * k..(i + 1) * k].contains(&(**v as i64))).count())
        .sum();
    hits as f64 / (truth.len() * k) as f64
}

#[test]
fn both_kinds_reach_high_recall_with_every_metric() {
    let (dim, n) = (16, 3000);
    let data = clustered(n + 100, dim, 1);
    for kind in [Kind::Hnsw, Kind::Vamana] {
        for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
            let mut idx = Index::new(params(kind, metric, Dtype::F32, dim)).unwrap();
            idx.add(Rows::F32(data[..n * dim].to_vec())).unwrap();
            let r = recall(&idx, Rows::F32(data[n * dim..].to_vec()), 10, 64);
            assert!(r > 0.9, "{kind:?} {metric:?}: recall@10 {r}");
        }
    }
}

#[test]
fn integer_dtypes_search_well() {
    let (dim, n) = (24, 2000);
    let data = clustered(n + 50, dim, 2);
    let u8s: Vec<u8> = data.iter().map(|x| ((x + 6.0) * 20.0).clamp(0.0, 255.0) as u8).collect();
    let i8s: Vec<i8> = data.iter().map(|x| (x * 20.0).clamp(-127.0, 127.0) as i8).collect();
    for (rows, q, dtype) in [
        (Rows::U8(u8s[..n * dim].to_vec()), Rows::U8(u8s[n * dim..].to_vec()), Dtype::U8),
        (Rows::I8(i8s[..n * dim].to_vec()), Rows::I8(i8s[n * dim..].to_vec()), Dtype::I8),
    ] {
        for metric in [Metric::L2, Metric::Cosine] {
            let mut idx = Index::new(params(Kind::Hnsw, metric, dtype, dim)).unwrap();
            idx.add(rows.clone()).unwrap();
            let r = recall(&idx, q.clone(), 10, 64);
            assert!(r > 0.9, "{dtype:?} {metric:?}: recall@10 {r}");
        }
    }
}

#[test]
fn incremental_adds_and_bad_arguments() {
    let dim = 8;
    let data = clustered(1200, dim, 3);
    for kind in [Kind::Hnsw, Kind::Vamana] {
        let mut idx = Index::new(params(kind, Metric::L2, Dtype::F32, dim)).unwrap();
        idx.add(Rows::F32(data[..600 * dim].to_vec())).unwrap();
        idx.add(Rows::F32(data[600 * dim..1100 * dim].to_vec())).unwrap();
        assert_eq!(idx.len(), 1100);
        assert!(recall(&idx, Rows::F32(data[1100 * dim..].to_vec()), 5, 64) > 0.9);
        assert!(idx.add(Rows::U8(vec![0; dim])).is_err());
        assert!(idx.add(Rows::F32(vec![0.0; dim + 1])).is_err());
        assert!(idx.add(Rows::F32(vec![f32::NAN; dim])).is_err());
        assert_eq!(idx.len(), 1100, "a refused add changes nothing");
        assert!(idx.search(Rows::F32(vec![0.0; dim]), 0, 10).is_err());
        // k beyond the index: every vector, then -1 / +inf (as FAISS)
        let (d, i) = idx.search(Rows::F32(vec![0.0; dim]), 1103, 10).unwrap();
        assert!(i[..1100].iter().all(|&x| x >= 0) && i[1100..] == [-1; 3] && d[1100..].iter().all(|x| x.is_infinite()));
        let mut all = i[..1100].to_vec();
        all.sort_unstable();
        assert_eq!(all, (0..1100).collect::<Vec<i64>>());
        assert!(idx.search(Rows::F32(vec![0.0; dim]), (1 << 20) + 1, 10).is_err());
        assert!(idx.search(Rows::F32(vec![0.0; dim]), 5, 0).is_err());
    }
    let mut p = params(Kind::Hnsw, Metric::L2, Dtype::F32, 0);
    assert!(Index::new(p).is_err());
    p.dim = 4;
    p.r = 1;
    assert!(Index::new(p).is_err());
}

#[test]
fn save_load_round_trip_and_damage_is_refused() {
    let dim = 8;
    let data = clustered(800, dim, 4);
    for kind in [Kind::Hnsw, Kind::Vamana] {
        let mut idx = Index::new(params(kind, Metric::L2, Dtype::F32, dim)).unwrap();
        idx.add(Rows::F32(data[..700 * dim].to_vec())).unwrap();
        let bytes = idx.to_bytes();
        let back = Index::from_bytes(&bytes).unwrap();
        assert_eq!(back.to_bytes(), bytes);
        let q = Rows::F32(data[700 * dim..].to_vec());
        assert_eq!(idx.search(q.clone(), 10, 40).unwrap(), back.search(q, 10, 40).unwrap());
        // every truncation and a flipped byte anywhere are refused
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for _ in 0..200 {
            let cut = rng.gen_range(0..bytes.len());
            assert!(Index::from_bytes(&bytes[..cut]).is_err());
            let mut d = bytes.clone();
            d[cut] ^= 1 << rng.gen_range(0..8);
            assert!(Index::from_bytes(&d).is_err());
        }
    }
    let empty = Index::new(params(Kind::Hnsw, Metric::L2, Dtype::F32, 4)).unwrap();
    assert_eq!(Index::from_bytes(&empty.to_bytes()).unwrap().len(), 0);
}

#[test]
fn a_checksummed_but_inconsistent_file_is_refused() {
    // Corrupt a neighbour id and fix up the checksum: the structural checks must still catch it.
    let dim = 4;
    let mut idx = Index::new(params(Kind::Hnsw, Metric::L2, Dtype::F32, dim)).unwrap();
    idx.add(Rows::F32(clustered(50, dim, 6))).unwrap();
    let mut b = idx.to_bytes();
    let body = b.len() - 4;
    let first_row = 60 + 50 * dim * 4;
    b[first_row + 4..first_row + 8].copy_from_slice(&999u32.to_le_bytes());
    let crc = crc32fast::hash(&b[..body]);
    b[body..].copy_from_slice(&crc.to_le_bytes());
    let e = Index::from_bytes(&b).unwrap_err().to_string();
    assert!(e.contains("out of range"), "{e}");
}

/// Issue 22: repeated vectors collapsed the graph (200 identical: 9 of 10 results; Vamana with 1,000 identical:
/// 2 of 10). Every search returns `k` results whenever the index holds `k` vectors, duplicates or not.
#[test]
fn duplicate_vectors_still_give_k_results() {
    let dim = 8;
    for (kind, n) in [(Kind::Hnsw, 200), (Kind::Vamana, 1000), (Kind::Hnsw, 1000), (Kind::Vamana, 200)] {
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let mut ix = Index::new(params(kind, Metric::L2, Dtype::F32, dim)).unwrap();
            pool.install(|| ix.add(Rows::F32(vec![0.5; n * dim]))).unwrap();
            // the duplicates' own point and a point elsewhere
            let q = Rows::F32([vec![0.5; dim], vec![3.0; dim]].concat());
            for k in [1, 10, 100, n] {
                let (d, ids) = ix.search(q.clone(), k, 16).unwrap();
                let mut seen: Vec<i64> = ids[..k].to_vec();
                seen.sort_unstable();
                seen.dedup();
                assert_eq!(seen.len(), k, "{kind:?} n {n} k {k} threads {threads}: {ids:?}");
                assert!(ids.iter().all(|&i| (0..n as i64).contains(&i)));
                assert!(d[..k].iter().all(|&x| x == 0.0));
            }
        }
    }
    // duplicates beside distinct points: the nearest are the duplicates, all found (built on one thread, so the
    // graph is the same in every run: a parallel build's graph depends on the threads' timing)
    let mut v = vec![0.25f32; 300 * dim];
    v.extend(clustered(700, dim, 5));
    let mut ix = Index::new(params(Kind::Hnsw, Metric::L2, Dtype::F32, dim)).unwrap();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    one.install(|| ix.add(Rows::F32(v))).unwrap();
    let (d, ids) = ix.search(Rows::F32(vec![0.25; dim]), 50, 60).unwrap();
    assert!(ids.iter().all(|&i| (0..300).contains(&i)) && d.iter().all(|&x| x == 0.0), "{ids:?}");
}

fn labelled_search(ix: &Index, q: &[f32], k: usize) -> Vec<i64> {
    ix.search(Rows::F32(q.to_vec()), k, 64).unwrap().1
}

#[test]
fn add_with_ids_remove_ids_and_their_file_round_trip() {
    let dim = 6;
    for kind in [Kind::Hnsw, Kind::Vamana] {
        let pts = clustered(900, dim, 11);
        let mut ix = Index::new(params(kind, Metric::L2, Dtype::F32, dim)).unwrap();
        ix.add(Rows::F32(pts[..300 * dim].to_vec())).unwrap();
        let g0 = ix.generation();
        let ids: Vec<i64> = (0..300).map(|i| 10_000 + 7 * i).collect();
        ix.add_with_ids(Rows::F32(pts[300 * dim..600 * dim].to_vec()), Some(&ids)).unwrap();
        assert!(ix.generation() > g0);
        ix.add(Rows::F32(pts[600 * dim..].to_vec())).unwrap(); // labels continue past the largest: 12094..
        assert_eq!((ix.label(0), ix.label(300), ix.label(600)), (0, 10_000, 10_000 + 7 * 299 + 1));
        // refused: repeats, ids already present, negatives, wrong count; nothing changes
        let one = Rows::F32(pts[..dim].to_vec());
        for bad in [vec![5i64], vec![10_000], vec![-1]] {
            assert!(ix.add_with_ids(one.clone(), Some(&bad)).is_err(), "{bad:?}");
        }
        assert!(ix.add_with_ids(Rows::F32(pts[..2 * dim].to_vec()), Some(&[1 << 40, 1 << 40])).is_err());
        assert!(ix.add_with_ids(one.clone(), Some(&[])).is_err());
        assert_eq!(ix.len(), 900);
        // each stored vector finds itself under its label
        let q = &pts[305 * dim..306 * dim];
        assert_eq!(labelled_search(&ix, q, 1), vec![10_000 + 7 * 5]);
        // remove a third (every third label) plus unknown labels: the rest are still found, the removed never
        let gone: Vec<i64> = (0..900u32).filter(|v| v % 3 == 0).map(|v| ix.label(v)).chain([-5, 1 << 50]).collect();
        let before: Vec<i64> = (0..900u32).map(|v| ix.label(v)).collect();
        assert_eq!(ix.remove_ids(&gone), 300);
        assert_eq!(ix.remove_ids(&gone), 0, "removing again removes nothing");
        assert_eq!(ix.len(), 600);
        let mut found = 0;
        for v in (0..900usize).filter(|v| v % 3 != 0) {
            let got = labelled_search(&ix, &pts[v * dim..(v + 1) * dim], 10);
            assert!(got.iter().all(|l| !gone.contains(l)), "{kind:?}: a removed label came back");
            found += usize::from(got[0] == before[v]);
        }
        assert!(found >= 590, "{kind:?}: {found} of 600 survivors find themselves first");
        // the file keeps the labels; a reloaded index searches alike
        let back = Index::from_bytes(&ix.to_bytes()).unwrap();
        assert_eq!(labelled_search(&back, q, 5), labelled_search(&ix, q, 5));
        // removing everything leaves an empty index that searches to padding, then takes new vectors
        let all: Vec<i64> = (0..ix.len() as u32).map(|v| ix.label(v)).collect();
        assert_eq!(ix.remove_ids(&all), 600);
        assert!(ix.is_empty());
        let (d, i) = ix.search(Rows::F32(q.to_vec()), 3, 8).unwrap();
        assert_eq!(i, vec![-1; 3]);
        assert!(d.iter().all(|x| x.is_infinite()));
        ix.add(Rows::F32(pts[..10 * dim].to_vec())).unwrap();
        assert!(labelled_search(&ix, &pts[..dim], 1)[0] > 12_094, "labels are never reused");
    }
}

#[test]
fn version_one_files_still_load() {
    let dim = 4;
    let mut ix = Index::new(params(Kind::Hnsw, Metric::L2, Dtype::F32, dim)).unwrap();
    ix.add(Rows::F32(clustered(100, dim, 2))).unwrap();
    let v2 = ix.to_bytes();
    // a version-1 file is the version-2 one without the labels section (next label u64 + flag byte)
    let mut v1 = v2[..v2.len() - 4 - 9].to_vec();
    v1[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32fast::hash(&v1);
    v1.extend_from_slice(&crc.to_le_bytes());
    let back = Index::from_bytes(&v1).unwrap();
    assert_eq!(back.len(), 100);
    assert_eq!(back.to_bytes(), v2);
}
