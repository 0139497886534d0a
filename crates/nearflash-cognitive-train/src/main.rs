//! `nearflash-cognitive-train`: trains the Fashion-MNIST hashing CNN (the layer list of
//! `nearflash_cognitive::network::fashion_hash_cnn`) with candle on the CPU and writes a safetensors model that the
//! rest of nearflash-cognitive reads. Reproducible: weights start from `Model::random(seed)` and batches are drawn
//! from a seeded permutation. Lin et al. (CVPRW'15): the hash layer's sigmoid feeds the classifier, trained with
//! cross-entropy only.

use candle_core::{DType, Device, Tensor, Var, D};
use candle_nn::{Optimizer, ParamsAdamW};
use nearflash_cognitive::fmnist::{self, Part, Split, PIXELS};
use nearflash_cognitive::model::{Model, Weights};
use nearflash_cognitive::network::{fashion_hash_cnn, Layer, Network};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::collections::HashMap;
use std::time::Instant;

struct Args {
    out: String,
    bits: usize,
    epochs: usize,
    batch: usize,
    lr: f64,
    seed: u64,
    limit: usize,
    data: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args { out: String::new(), bits: 48, epochs: 3, batch: 64, lr: 1e-3, seed: 1, limit: 0, data: None };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or_else(|| format!("{k} needs a value"));
        let num = |s: String, what: &str| s.parse::<f64>().map_err(|_| format!("{what}: {s:?} is not a number"));
        match k.as_str() {
            "--out" => a.out = v()?,
            "--bits" => a.bits = num(v()?, "--bits")? as usize,
            "--epochs" => a.epochs = num(v()?, "--epochs")? as usize,
            "--batch" => a.batch = num(v()?, "--batch")? as usize,
            "--lr" => a.lr = num(v()?, "--lr")?,
            "--seed" => a.seed = num(v()?, "--seed")? as u64,
            "--limit" => a.limit = num(v()?, "--limit")? as usize,
            "--data" => a.data = Some(v()?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if a.out.is_empty() {
        return Err("--out PATH is required".into());
    }
    if !(1..=64).contains(&a.bits) {
        return Err(format!("--bits {}: 1 to 64 allowed", a.bits));
    }
    if a.epochs == 0 || a.batch == 0 || !(a.lr > 0.0 && a.lr < 1.0) {
        return Err("--epochs and --batch must be positive, --lr in (0, 1)".into());
    }
    Ok(a)
}

type Params = HashMap<String, (Var, Var)>;

fn forward(net: &Network, p: &Params, x: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
    let mut x = x.clone();
    let layer = |l: &Layer, x: &Tensor| -> candle_core::Result<Tensor> {
        Ok(match l {
            Layer::Conv { name, out_ch, stride, pad, .. } => {
                let (w, b) = &p[name];
                x.conv2d(w.as_tensor(), *pad, *stride, 1, 1)?.broadcast_add(&b.as_tensor().reshape((1, *out_ch, 1, 1))?)?
            }
            Layer::MaxPool { size, stride } => x.max_pool2d_with_stride((*size, *size), (*stride, *stride))?,
            Layer::Relu => x.relu()?,
            Layer::Flatten => x.flatten_from(1)?,
            Layer::Fc { name, .. } => {
                let (w, b) = &p[name];
                x.matmul(&w.as_tensor().t()?)?.broadcast_add(b.as_tensor())?
            }
        })
    };
    for l in &net.body {
        x = layer(l, &x)?;
    }
    let logits = layer(net.classifier.as_ref().expect("classifier"), &candle_nn::ops::sigmoid(&x)?)?;
    Ok((x, logits))
}

fn batch(split: &Split, idx: &[usize], dev: &Device) -> candle_core::Result<(Tensor, Tensor)> {
    let mut px = Vec::with_capacity(idx.len() * PIXELS);
    for &i in idx {
        px.extend(split.image(i).iter().map(|&v| v as f32 / 255.0));
    }
    let labels: Vec<u32> = idx.iter().map(|&i| split.labels[i] as u32).collect();
    Ok((Tensor::from_vec(px, (idx.len(), 1, 28, 28), dev)?, Tensor::from_vec(labels, idx.len(), dev)?))
}

fn accuracy(net: &Network, p: &Params, split: &Split, dev: &Device) -> candle_core::Result<f64> {
    let mut right = 0usize;
    let all: Vec<usize> = (0..split.len()).collect();
    for chunk in all.chunks(500) {
        let (x, y) = batch(split, chunk, dev)?;
        let (_, logits) = forward(net, p, &x)?;
        let pred = logits.argmax(D::Minus1)?;
        right += pred.eq(&y)?.to_dtype(DType::U32)?.sum_all()?.to_scalar::<u32>()? as usize;
    }
    Ok(right as f64 / split.len() as f64)
}

fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::Cpu;
    let dir = a.data.clone().map_or_else(fmnist::default_dir, Into::into);
    let mut train = fmnist::load(&dir, Part::Train)?;
    if a.limit > 0 {
        train = train.head(a.limit);
    }
    let mut test = fmnist::load(&dir, Part::Test)?;
    if a.limit > 0 {
        test = test.head(a.limit); // a quick run is judged on as many test images
    }
    let net = fashion_hash_cnn(a.bits);
    let init = Model::random(net.clone(), a.seed)?;
    let mut params = Params::new();
    for l in net.weighted() {
        let (wshape, blen) = l.weight_shape().unwrap();
        let w = &init.weights[&l.label()];
        let wv = Var::from_tensor(&Tensor::from_vec(w.weight.clone(), wshape, &dev)?)?;
        let bv = Var::from_tensor(&Tensor::from_vec(w.bias.clone(), blen, &dev)?)?;
        params.insert(l.label(), (wv, bv));
    }
    let vars: Vec<Var> = params.values().flat_map(|(w, b)| [w.clone(), b.clone()]).collect();
    let mut opt = candle_nn::AdamW::new(vars, ParamsAdamW { lr: a.lr, weight_decay: 0.0, ..Default::default() })?;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(a.seed);
    let t0 = Instant::now();
    for epoch in 0..a.epochs {
        let mut order: Vec<usize> = (0..train.len()).collect();
        order.shuffle(&mut rng);
        let (mut loss_sum, mut n) = (0.0f64, 0usize);
        for chunk in order.chunks(a.batch) {
            let (x, y) = batch(&train, chunk, &dev)?;
            let (_, logits) = forward(&net, &params, &x)?;
            let loss = candle_nn::loss::cross_entropy(&logits, &y)?;
            opt.backward_step(&loss)?;
            loss_sum += loss.to_scalar::<f32>()? as f64;
            n += 1;
        }
        eprintln!("epoch {} loss {:.4} ({:.0} s)", epoch + 1, loss_sum / n as f64, t0.elapsed().as_secs_f64());
    }
    let train_s = t0.elapsed().as_secs_f64();
    let acc = accuracy(&net, &params, &test, &dev)?;
    let mut weights = HashMap::new();
    for (name, (w, b)) in &params {
        let weight = w.as_tensor().flatten_all()?.to_vec1::<f32>()?;
        weights.insert(name.clone(), Weights { weight, bias: b.as_tensor().to_vec1::<f32>()? });
    }
    let mut metadata = std::collections::BTreeMap::new();
    for (k, v) in [
        ("trainer", "nearflash-cognitive-train (candle-core 0.9, CPU)".to_string()),
        ("seed", a.seed.to_string()),
        ("epochs", a.epochs.to_string()),
        ("batch", a.batch.to_string()),
        ("lr", a.lr.to_string()),
        ("optimizer", "AdamW, weight decay 0".into()),
        ("train_images", train.len().to_string()),
        ("test_images", test.len().to_string()),
        ("train_seconds", format!("{train_s:.1}")),
        ("test_accuracy", format!("{acc:.4}")),
    ] {
        metadata.insert(k.to_string(), v);
    }
    let model = Model { network: net, weights, metadata };
    std::fs::write(&a.out, model.to_safetensors())?;
    println!(
        "{{\"out\": {:?}, \"bits\": {}, \"epochs\": {}, \"train_images\": {}, \"train_seconds\": {train_s:.1}, \"test_accuracy\": {acc:.4}}}",
        a.out,
        a.bits,
        a.epochs,
        train.len()
    );
    Ok(())
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("nearflash-cognitive-train: {e}\nusage: --out PATH [--bits 48] [--epochs 3] [--batch 64] [--lr 0.001] [--seed 1] [--limit N] [--data DIR]");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(a) {
        eprintln!("nearflash-cognitive-train: {e}");
        std::process::exit(1);
    }
}
