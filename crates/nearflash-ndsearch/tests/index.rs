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
        assert!(idx.search(Rows::F32(vec![0.0; dim]), 1101, 10).is_err());
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
