//! `nearflash-cognitive-train`: trains the Fashion-MNIST hashing CNN (the layer list of
//! `nearflash_cognitive::network::fashion_hash_cnn`) with candle on the CPU and writes a safetensors model that the
//! rest of nearflash-cognitive reads. Reproducible: weights start from `Model::random(seed)` and batches are drawn
//! from a seeded permutation. Lin et al. (CVPRW'15): the hash layer's sigmoid feeds the classifier, trained with
//! cross-entropy only.

use candle_core::{Device, Tensor, Var};
use nearflash_cognitive::model::{Model, Weights};
use nearflash_cognitive::network::{fashion_hash_cnn, Layer, Network};
use nearflash_cognitive_train::{accuracy, fit, load_splits, main_with, number, parse_args, Common};
use std::collections::HashMap;

const NAME: &str = "nearflash-cognitive-train";
const USAGE: &str = "--out PATH [--bits 48] [--epochs 3] [--batch 64] [--lr 0.001] [--seed 1] [--limit N] [--data DIR]";

fn args() -> Result<(Common, usize), String> {
    let mut bits = 48usize;
    let a = parse_args(std::env::args().skip(1), 3, |k, v| {
        Ok(k == "--bits" && {
            bits = number(&v, "--bits")? as usize;
            true
        })
    })?;
    if !(1..=64).contains(&bits) {
        return Err(format!("--bits {bits}: 1 to 64 allowed"));
    }
    Ok((a, bits))
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

fn run((a, bits): (Common, usize)) -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::Cpu;
    let (train, test) = load_splits(&a)?;
    let net = fashion_hash_cnn(bits);
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
    let logits = |x: &Tensor| Ok(forward(&net, &params, x)?.1);
    let train_s = fit(vars, &train, &a, &dev, logits)?;
    let acc = accuracy(&test, &dev, logits)?;
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
        bits,
        a.epochs,
        train.len()
    );
    Ok(())
}

fn main() {
    main_with(NAME, USAGE, args, run);
}
