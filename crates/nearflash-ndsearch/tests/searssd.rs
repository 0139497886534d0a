//! SearSSD's pieces on real graphs: the lock-step batch search returns exactly the host search's ids and distances
//! (many seeds, both graph kinds, with and without speculation); reordering lowers B(G, f) and the page access
//! ratio; dynamic allocating lowers it further; LUNCSR round-trips the graph.

use nearflash_ndsearch::allocate::page_access_ratio;
use nearflash_ndsearch::lockstep::{lockstep_search, LockstepConfig};
use nearflash_ndsearch::luncsr::{Geometry, LunCsr};
use nearflash_ndsearch::reorder::{bandwidth, degree_ascending_bfs, positions, random_bfs, relabel};
use nearflash_ndsearch::{Dtype, Index, Kind, Metric, Params, Rows};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn index(kind: Kind, n: usize, dim: usize, seed: u64) -> (Index, Vec<f32>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let centres: Vec<f32> = (0..8 * dim).map(|_| rng.gen_range(-4.0..4.0)).collect();
    let mut pts = |m: usize| -> Vec<f32> {
        (0..m).flat_map(|i| (0..dim).map(|j| centres[(i % 8) * dim + j] + rng.gen_range(-1.0..1.0)).collect::<Vec<_>>()).collect()
    };
    let base = pts(n);
    let q = pts(40);
    let p = Params { kind, metric: Metric::L2, dtype: Dtype::F32, dim, r: 10, ef_construction: 40, alpha: 1.2, seed };
    let mut ix = Index::new(p).unwrap();
    ix.add(Rows::F32(base)).unwrap();
    (ix, q)
}

#[test]
fn lockstep_equals_host_search_over_many_seeds() {
    let dim = 8;
    for seed in 0..12u64 {
        let kind = if seed % 2 == 0 { Kind::Hnsw } else { Kind::Vamana };
        let (ix, q) = index(kind, 600, dim, seed);
        let qv = |i: u32| nearflash_ndsearch::VecRef::F32(&q[i as usize * dim..(i as usize + 1) * dim]);
        let entries: Vec<u32> = (0..40).map(|i| ix.entry_for(qv(i)).unwrap()).collect();
        for speculate in [0, 4] {
            let cfg = LockstepConfig { k: 10, ef: 24 + seed as usize, speculate, vertices: ix.len() };
            let ls = lockstep_search(&entries, cfg, |v, f| ix.layer0().for_each(v, f), |qi, v| ix.distance_to(qv(qi), v));
            for i in 0..40u32 {
                let host = ix.search_one(qv(i), cfg.k, cfg.ef);
                assert_eq!(ls.results[i as usize], host, "seed {seed} query {i} speculate {speculate}");
            }
            if speculate > 0 {
                assert!(ls.speculation_used() > 0);
            } else {
                assert_eq!(ls.speculation_used(), 0);
            }
        }
    }
}

#[test]
fn reordering_and_dynamic_allocating_cut_page_accesses() {
    let dim = 16;
    let (ix, q) = index(Kind::Hnsw, 4000, dim, 99);
    let g = Geometry { luns: 8, planes_per_lun: 2, blocks_per_plane: 64, pages_per_block: 16, page_bytes: 1024 };
    let qv = |i: u32| nearflash_ndsearch::VecRef::F32(&q[i as usize * dim..(i as usize + 1) * dim]);
    let entries: Vec<u32> = (0..40).map(|i| ix.entry_for(qv(i)).unwrap()).collect();
    let trace = lockstep_search(&entries, LockstepConfig { k: 10, ef: 32, speculate: 0, vertices: ix.len() }, |v, f| ix.layer0().for_each(v, f), |qi, v| {
        ix.distance_to(qv(qi), v)
    });
    let its: Vec<_> = trace.iterations.iter().map(|i| i.pairs.clone()).collect();
    let ratio_of = |order: Option<&Vec<u32>>, dynamic: bool| {
        let adj = order.map_or_else(|| relabel(ix.layer0(), &(0..4000).collect()), |o| relabel(ix.layer0(), o));
        let pos: Vec<u32> = order.map_or_else(|| (0..4000).collect(), positions);
        let l = LunCsr::build(&adj, dim * 4, g).unwrap();
        let mapped: Vec<Vec<_>> = its
            .iter()
            .map(|it| it.iter().map(|p| nearflash_ndsearch::allocate::Pair { query: p.query, vertex: pos[p.vertex as usize] }).collect())
            .collect();
        page_access_ratio(&mapped, &l, dynamic)
    };
    let cm = degree_ascending_bfs(ix.layer0());
    let rnd = random_bfs(ix.layer0(), 1);
    let (b0, b_cm, b_rnd) = (bandwidth(ix.layer0(), None), bandwidth(ix.layer0(), Some(&cm)), bandwidth(ix.layer0(), Some(&rnd)));
    let (plain, reordered, dynamic) = (ratio_of(None, false), ratio_of(Some(&cm), false), ratio_of(Some(&cm), true));
    eprintln!(
        "B(G,f): insertion order {b0:.0}, degree-ascending BFS {b_cm:.0}, random BFS {b_rnd:.0}; page access ratio: \
         insertion order {plain:.3}, degree BFS {reordered:.3}, random BFS {:.3}, degree BFS + dynamic {dynamic:.3}",
        ratio_of(Some(&rnd), false)
    );
    assert!(b_cm < b0 && b_rnd < b0, "B(G,f): natural {b0}, degree BFS {b_cm}, random BFS {b_rnd}");
    assert!(reordered < plain, "{plain} -> {reordered}");
    assert!(dynamic < reordered, "{reordered} -> {dynamic}");
    // the layout keeps every edge
    let l = LunCsr::build(&relabel(ix.layer0(), &cm), dim * 4, g).unwrap();
    let pos = positions(&cm);
    for v in 0..4000u32 {
        let mut want: Vec<u32> = ix.layer0().neighbours(v).iter().map(|&u| pos[u as usize]).collect();
        let mut got = l.neighbours_of(pos[v as usize]).to_vec();
        want.sort();
        got.sort();
        assert_eq!(got, want);
    }
}

#[test]
fn a_modelled_batch_returns_the_host_results_and_scheduling_helps() {
    use nearflash_ndsearch::study::{run_batch, Reorder};
    use nearflash_ndsearch::timing::{FlashTiming, SearssdParams};
    let dim = 16;
    let (ix, q) = index(Kind::Hnsw, 3000, dim, 5);
    let g = Geometry { luns: 8, planes_per_lun: 2, blocks_per_plane: 64, pages_per_block: 16, page_bytes: 1024 };
    let p = SearssdParams::default();
    let f = FlashTiming::SEARSSD;
    let run = |r, dynamic| run_batch(&ix, Rows::F32(q.clone()), 10, 32, r, dynamic, g, &p, &f).unwrap();
    let plain = run(Reorder::None, false);
    let reordered = run(Reorder::DegreeBfs, false);
    let dynamic = run(Reorder::DegreeBfs, true);
    let (_, host_ids) = ix.search(Rows::F32(q.clone()), 10, 32).unwrap();
    for rep in [&plain, &reordered, &dynamic] {
        let ids: Vec<i64> = rep.ids.iter().flatten().map(|&v| v as i64).collect();
        assert_eq!(ids, host_ids);
    }
    assert!(reordered.page_access_ratio < plain.page_access_ratio);
    assert!(dynamic.page_access_ratio < reordered.page_access_ratio);
    assert!(dynamic.total_ns < reordered.total_ns && reordered.total_ns <= plain.total_ns, "{plain:?} {reordered:?} {dynamic:?}");
    let spec = run_batch(&ix, Rows::F32(q.clone()), 10, 32, Reorder::DegreeBfs, true, g, &SearssdParams { speculate: 4, ..p.clone() }, &f).unwrap();
    assert!(spec.speculative > 0 && spec.speculation_used > 0);
    assert!(run_batch(&ix, Rows::F32(q), 0, 32, Reorder::None, true, g, &p, &f).is_err());
}

#[test]
fn baselines_return_the_host_results_and_are_ordered_against_searssd() {
    use nearflash_ndsearch::baselines::{BaselineParams, Design};
    use nearflash_ndsearch::study::{run_batch_as, Reorder, Variant};
    use nearflash_ndsearch::timing::{FlashTiming, SearssdParams};
    let dim = 64;
    let g = Geometry { luns: 32, planes_per_lun: 2, blocks_per_plane: 64, pages_per_block: 16, page_bytes: 4096 };
    let (p, b, f) = (SearssdParams::default(), BaselineParams::default(), FlashTiming::SEARSSD);
    for (kind, seed) in [(Kind::Hnsw, 3u64), (Kind::Vamana, 8)] {
        let (ix, q) = index(kind, 4000, dim, seed);
        let (hd, hi) = ix.search(Rows::F32(q.clone()), 10, 32).unwrap();
        let run = |design, dynamic| {
            let v = Variant { design, multiplane: true };
            run_batch_as(&ix, Rows::F32(q.clone()), 10, 32, Reorder::DegreeBfs, dynamic, g, &p, &f, v, &b).unwrap()
        };
        let reps: Vec<_> = Design::ALL.iter().map(|&d| run(d, true)).collect();
        for rep in &reps {
            let ids: Vec<i64> = rep.ids.iter().flatten().map(|&v| v as i64).collect();
            let ds: Vec<f32> = rep.distances.iter().flatten().copied().collect();
            assert_eq!(ids, hi, "{}", rep.design);
            assert_eq!(ds, hd, "{}", rep.design);
            // the same trace and pages for every placement
            assert_eq!((rep.trace_length, rep.page_reads), (reps[0].trace_length, reps[0].page_reads));
        }
        let [s, cp, c, smart] = [0, 1, 2, 3].map(|i| &reps[i]);
        assert!(s.total_ns < cp.total_ns, "SearSSD {} vs DS-cp {}", s.total_ns, cp.total_ns);
        assert!(cp.total_ns < c.total_ns, "DS-cp {} vs DS-c {}", cp.total_ns, c.total_ns);
        assert!(cp.total_ns < smart.total_ns, "DS-cp {} vs SmartSSD-only {}", cp.total_ns, smart.total_ns);
        assert!(s.queries_per_joule > cp.queries_per_joule && cp.queries_per_joule > smart.queries_per_joule);
        assert!(s.nand_io_bytes < cp.nand_io_bytes && smart.link_bytes > s.link_bytes);
        // without dynamic allocating the baselines move more pages and take longer
        let cp_static = run(Design::DsCp, false);
        assert!(cp_static.page_reads > cp.page_reads && cp_static.total_ns > cp.total_ns);
        // single-plane reads (Fig. 16's bare machine) take more read operations and no less time
        let sp = run_batch_as(&ix, Rows::F32(q.clone()), 10, 32, Reorder::DegreeBfs, true, g, &p, &f,
                              Variant { design: Design::SearSsd, multiplane: false }, &b).unwrap();
        assert!(sp.read_ops > s.read_ops && sp.total_ns >= s.total_ns && sp.ids == s.ids);
    }
}

/// The lock-step batch search continues from unvisited vertices exactly as the host search does when a graph of
/// repeated vectors leaves fewer than `k` reachable: equal results, `k` each.
#[test]
fn lockstep_equals_host_search_on_duplicates() {
    let dim = 4;
    for kind in [Kind::Hnsw, Kind::Vamana] {
        let p = Params { kind, metric: Metric::L2, dtype: Dtype::F32, dim, r: 4, ef_construction: 20, alpha: 1.2, seed: 3 };
        let mut ix = Index::new(p).unwrap();
        let mut v = vec![1.0f32; 400 * dim];
        v.extend((0..100 * dim).map(|i| (i % 13) as f32));
        ix.add(Rows::F32(v)).unwrap();
        let q: Vec<f32> = [vec![1.0; dim], vec![5.0; dim], vec![12.0; dim]].concat();
        let qv = |i: u32| nearflash_ndsearch::VecRef::F32(&q[i as usize * dim..(i as usize + 1) * dim]);
        let entries: Vec<u32> = (0..3).map(|i| ix.entry_for(qv(i)).unwrap()).collect();
        for k in [10, 60] {
            let cfg = LockstepConfig { k, ef: 8, speculate: 2, vertices: ix.len() };
            let ls = lockstep_search(&entries, cfg, |v, f| ix.layer0().for_each(v, f), |qi, v| ix.distance_to(qv(qi), v));
            for i in 0..3u32 {
                let host = ix.search_one(qv(i), k, cfg.ef);
                assert_eq!(host.len(), k, "{kind:?} k {k}");
                assert_eq!(ls.results[i as usize], host, "{kind:?} k {k} query {i}");
            }
        }
    }
}
