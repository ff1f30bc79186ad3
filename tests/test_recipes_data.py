"""The data recipes end to end on tiny fixture archives with the official names and internal paths.

Each test writes a handful of sentences into archives laid out like the real
downloads (same archive names, same paths inside), runs the recipe with
``--archives`` (no network), and checks the binarized data and stats.json.
"""
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile

import pytest

from posnet_fairseq.data.synth import generate_pairs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)


def _env():
    env = dict(os.environ)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env["PYTHON"] = sys.executable
    env.pop("POSNET_ARCHIVES", None)
    return env


def run_recipe(script, *args, check=True):
    proc = subprocess.run(["bash", os.path.join(REPO, "recipes", "data", script), "--workers", "1", *args],
                          env=_env(), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


def test_the_corpus_tools_the_recipes_run_from_their_folder_shadow_no_standard_module():
    """recipes/lib/data.sh runs text.py and clean_corpus.py as scripts (not through the package, whose import loads
    torch), so their folder comes first on sys.path: a module there named as one of the standard library's would
    be imported in its place by them or by sacremoses."""
    folder = os.path.join(REPO, "posnet_fairseq", "data")
    names = {name[:-3] for name in os.listdir(folder) if name.endswith(".py")}
    assert {"text", "clean_corpus"} <= names and not names & sys.stdlib_module_names


def _tar(path, files, mode="w:gz"):
    """files: {internal path: list of lines or bytes}."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tarfile.open(path, mode) as tar:
        for name, content in files.items():
            data = content if isinstance(content, bytes) else "".join(l + "\n" for l in content).encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _sgm(lines, setid, lang):
    return ([f'<refset setid="{setid}" srclang="any" trglang="{lang}">', '<doc sysid="ref" docid="d1" genre="news">']
            + [f'<seg id="{i + 1}">{l}</seg>' for i, l in enumerate(lines)] + ["</doc>", "</refset>"])


def _pairs(n, seed):
    """Sentence pairs with some casing, punctuation and hyphens, so tokenisation has work to do."""
    out = []
    for i, (a, b) in enumerate(generate_pairs(n, seed=seed, max_len=24)):
        a, b = a.capitalize().replace(" .", "."), b.capitalize().replace(" .", ".")
        if i % 5 == 0:
            a, b = a[:-1] + ", isn't it well-known?", b[:-1] + " \u201cgut\u201d!"
        out.append((a, b))
    return out


def _stats(out):
    with open(os.path.join(out, "stats.json")) as f:
        return json.load(f)


def _check_binarized(out, src, tgt, splits=("train", "valid", "test")):
    """Every sentence of the BPE files is in the binarized data, with its number of tokens (+ EOS)."""
    from fairseq.data import data_utils

    for split in splits:
        for lang in (src, tgt):
            with open(os.path.join(out, "bpe", f"{split}.{lang}"), encoding="utf-8") as f:
                lengths = [len(line.split()) + 1 for line in f]
            dataset = data_utils.load_indexed_dataset(os.path.join(out, "data-bin", f"{split}.{src}-{tgt}.{lang}"), None)
            assert list(dataset.sizes) == lengths, (split, lang)


def _check_gamma(out, src, tgt, stats):
    from posnet_fairseq.data.length_ratio import length_ratio

    assert stats["length_ratio"] == pytest.approx(length_ratio(os.path.join(out, "data-bin"), src, tgt), abs=1e-6)
    assert stats["length_ratio"] == pytest.approx(stats["mean_source_length"] / stats["mean_target_length"], rel=1e-3)


def test_prepare_iwslt14(tmp_path):
    pairs = _pairs(120, seed=3)
    files = {}
    for side, lang in ((0, "de"), (1, "en")):
        lines = []
        for i, p in enumerate(pairs[:80]):
            if i % 20 == 0:
                lines += ["<url>http://www.ted.com/talks/x.html</url>", "<keywords>talks</keywords>",
                          f"<talkid>{i}</talkid>", f"<title>Talk {i}</title>", f"<description>About {i}</description>"]
            lines.append(p[side])
        files[f"de-en/train.tags.de-en.{lang}"] = lines
        for k, name in enumerate(["IWSLT14.TED.dev2010", "IWSLT14.TEDX.dev2012", "IWSLT14.TED.tst2010",
                                  "IWSLT14.TED.tst2011", "IWSLT14.TED.tst2012"]):
            segs = [p[side] for p in pairs[80 + 8 * k: 88 + 8 * k]]
            files[f"de-en/{name}.de-en.{lang}.xml"] = (
                ['<?xml version="1.0" encoding="UTF-8"?>', "<mteval>", f'<srcset setid="{name}">', '<doc docid="1">']
                + [f'<seg id="{j + 1}"> {s} </seg>' for j, s in enumerate(segs)] + ["</doc>", "</srcset>", "</mteval>"])
    _tar(str(tmp_path / "archives" / "de-en.tgz"), files)
    out = str(tmp_path / "iwslt")
    run_recipe("prepare-iwslt14.sh", "--out", out, "--archives", str(tmp_path / "archives"))
    stats = _stats(out)
    # 80 training sentences + 4 * 5 metadata lines; titles and descriptions are kept as text
    assert stats["pairs"]["test"] == 40
    assert stats["pairs"]["train"] + stats["pairs"]["valid"] == 80 + 4 * 2
    assert stats["pairs"]["valid"] == (80 + 8) // 23
    assert stats["joined_dictionary"] and set(stats["vocab"]) == {"de", "en"}  # one vocabulary (PosNet Table 1)
    _check_binarized(out, "de", "en")
    _check_gamma(out, "de", "en", stats)
    ev = stats["eval"]
    assert ev["lowercase"] and ev["sacrebleu_tokenize"] == "13a" and ev["target_lang"] == "en"
    tok_ref = open(os.path.join(out, ev["test_sets"]["test"]["tok_ref"])).read().splitlines()
    raw_ref = open(os.path.join(out, ev["test_sets"]["test"]["raw_ref"])).read().splitlines()
    assert len(tok_ref) == len(raw_ref) == 40 and tok_ref[0] == tok_ref[0].lower() and raw_ref[0] != raw_ref[0].lower()
    assert "&apos;" in open(os.path.join(out, "tok", "train.de")).read()  # Moses escaping, as tokenizer.perl


def _wmt_train(tmp_path, pair, corpora, n, seed, src, tgt):
    """corpora: {archive: internal prefix}; each archive holds n pairs."""
    pairs = _pairs(n * len(corpora), seed)
    for k, (archive, prefix) in enumerate(corpora.items()):
        chunk = pairs[k * n:(k + 1) * n]
        files = {f"{prefix}.{src}": [p[0] for p in chunk], f"{prefix}.{tgt}": [p[1] for p in chunk]}
        _tar(str(tmp_path / "archives" / archive), files)


def test_prepare_wmt14_en_de(tmp_path):
    _wmt_train(tmp_path, "de-en", {
        "training-parallel-europarl-v7.tgz": "training/europarl-v7.de-en",
        "training-parallel-commoncrawl.tgz": "commoncrawl.de-en",
        "training-parallel-nc-v9.tgz": "training/news-commentary-v9.de-en"}, 70, 5, "en", "de")
    test = _pairs(12, seed=99)
    _tar(str(tmp_path / "archives" / "test-full.tgz"), {
        "test-full/newstest2014-deen-src.en.sgm": _sgm([p[0] for p in test], "newstest2014", "en"),
        "test-full/newstest2014-deen-ref.de.sgm": _sgm([p[1] for p in test], "newstest2014", "de"),
        "test-full/newstest2014-deen-src.de.sgm": _sgm([p[1] for p in test], "newstest2014", "de")})
    # --paper aan: the AAN+ paper's 32K merges, under their own dataset name (the default --out)
    proc = subprocess.run(["bash", os.path.join(REPO, "recipes", "data", "prepare-wmt14-en-de.sh"), "--workers", "1",
                           "--archives", str(tmp_path / "archives"), "--paper", "aan"],
                          env=_env(), capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = str(tmp_path / "data" / "wmt14_en_de_bpe32k")
    stats = _stats(out)
    assert (stats["dataset"], stats["bpe_merges"]) == ("wmt14_en_de_bpe32k", "32000")
    assert stats["pairs"]["test"] == 12 and stats["pairs"]["valid"] == 2
    assert 190 <= stats["pairs"]["train"] <= 208  # 210 - 2 valid, a few dropped by the ratio filter
    assert stats["joined_dictionary"] and stats["bpe"] == "subword-nmt joint 32000 merges (aan)"
    assert stats["eval"]["compound_split"] and stats["eval"]["sacrebleu_tokenize"] == "13a"
    _check_binarized(out, "en", "de")
    _check_gamma(out, "en", "de", stats)
    assert "@-@" in open(os.path.join(out, "tok", "train.en")).read()  # tokenizer.perl -a


def test_prepare_wmt14_en_de_as_the_posnet_authors(tmp_path):
    """apptek/posnet-position_based_attention data/wmt14/en-de/prepare.bash: BPE_TOKENS=40000, News Commentary
    v12 (WMT17's archive), and ’ written ' in the test references (its sed "s/’/'/g") before scoring."""
    _wmt_train(tmp_path, "de-en", {
        "training-parallel-europarl-v7.tgz": "training/europarl-v7.de-en",
        "training-parallel-commoncrawl.tgz": "commoncrawl.de-en",
        "training-parallel-nc-v12.tgz": "training/news-commentary-v12.de-en"}, 40, 7, "en", "de")
    test = [(a, b + " Das ist\u2019s.") for a, b in _pairs(6, seed=97)]
    _tar(str(tmp_path / "archives" / "test-full.tgz"), {
        "test-full/newstest2014-deen-src.en.sgm": _sgm([p[0] for p in test], "newstest2014", "en"),
        "test-full/newstest2014-deen-ref.de.sgm": _sgm([p[1] for p in test], "newstest2014", "de")})
    proc = subprocess.run(["bash", os.path.join(REPO, "recipes", "data", "prepare-wmt14-en-de.sh"), "--workers", "1",
                           "--archives", str(tmp_path / "archives")], env=_env(), capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    stats = _stats(str(tmp_path / "data" / "wmt14_en_de_bpe40k"))
    assert (stats["dataset"], stats["bpe_merges"]) == ("wmt14_en_de_bpe40k", "40000")
    assert stats["corpora"] == "europarl-v7.de-en,commoncrawl.de-en,news-commentary-v12.de-en"
    refs = open(tmp_path / "data" / "wmt14_en_de_bpe40k" / "raw" / "test.de", encoding="utf-8").read()
    assert "Das ist's." in refs and "\u2019" not in refs


def test_prepare_wmt14_en_fr(tmp_path):
    corpora = {"training-parallel-europarl-v7.tgz": "training/europarl-v7.fr-en",
               "training-parallel-commoncrawl.tgz": "commoncrawl.fr-en",
               "training-parallel-un.tgz": "un/undoc.2000.fr-en",
               "training-parallel-nc-v9.tgz": "training/news-commentary-v9.fr-en"}
    _wmt_train(tmp_path, "fr-en", corpora, 60, 6, "en", "fr")
    giga = _pairs(1160, seed=8)  # valid is every 1333rd pair: 1400 pairs give one
    _tar(str(tmp_path / "archives" / "training-giga-fren.tar"), {
        "giga-fren.release2.fixed.en.gz": gzip.compress("".join(p[0] + "\n" for p in giga).encode()),
        "giga-fren.release2.fixed.fr.gz": gzip.compress("".join(p[1] + "\n" for p in giga).encode())}, mode="w")
    test = _pairs(10, seed=98)
    _tar(str(tmp_path / "archives" / "test-full.tgz"), {
        "test-full/newstest2014-fren-src.en.sgm": _sgm([p[0] for p in test], "newstest2014", "en"),
        "test-full/newstest2014-fren-ref.fr.sgm": _sgm([p[1] for p in test], "newstest2014", "fr")})
    out = str(tmp_path / "enfr")
    run_recipe("prepare-wmt14-en-fr.sh", "--out", out, "--archives", str(tmp_path / "archives"), "--bpe-merges", "500")
    stats = _stats(out)
    assert stats["pairs"]["test"] == 10 and stats["pairs"]["valid"] == 1
    assert 1300 <= stats["pairs"]["train"] <= 1399
    assert (stats["bpe"], stats["dataset"]) == ("subword-nmt joint 500 merges", "wmt14_en_fr_bpe500")
    _check_binarized(out, "en", "fr")
    _check_gamma(out, "en", "fr", stats)
    # the hard-coded Gaussian paper's En-Fr: Europarl + Common Crawl only, under its own dataset name
    for archive in ("training-parallel-un.tgz", "training-parallel-nc-v9.tgz", "training-giga-fren.tar"):
        os.remove(tmp_path / "archives" / archive)
    ep = _pairs(1400, seed=9)  # enough for one valid pair (every 1333rd)
    _tar(str(tmp_path / "archives" / "training-parallel-europarl-v7.tgz"), {
        "training/europarl-v7.fr-en.en": [p[0] for p in ep], "training/europarl-v7.fr-en.fr": [p[1] for p in ep]})
    run_recipe("prepare-wmt14-en-fr.sh", "--archives", str(tmp_path / "archives"),
               "--paper", "gaussian", "--out", str(tmp_path / "epcc"))
    stats = _stats(str(tmp_path / "epcc"))
    assert stats["corpora"] == "europarl-v7.fr-en,commoncrawl.fr-en" and stats["dataset"] == "wmt14_en_fr_epcc"
    assert stats["bpe_merges"] == "32000"  # the authors' bpe.32000 (stupidNMT data/annotated.py)
    assert stats["pairs"]["test"] == 10 and stats["pairs"]["valid"] == 1 and 1300 <= stats["pairs"]["train"] <= 1459


def _zh(sentence):
    """A deterministic 'Chinese' side: one CJK character per letter of each word, no spaces."""
    return "".join(chr(0x4E00 + (ord(c) * 7 + len(w)) % 2000) for w in sentence.lower().split() for c in w[:2]) + "\u3002"


def test_prepare_wmt18_en_zh(tmp_path):
    arch = tmp_path / "archives"
    pairs = [(a, _zh(b)) for a, b in _pairs(150, seed=11)]
    nc, un, cw = pairs[:60], pairs[60:110], pairs[110:]
    _tar(str(arch / "training-parallel-nc-v13.tgz"), {
        "training-parallel-nc-v13/news-commentary-v13.zh-en.en": [p[0] for p in nc],
        "training-parallel-nc-v13/news-commentary-v13.zh-en.zh": [p[1] for p in nc]})
    # the UN corpus comes as a .tar.gz split into two parts
    _tar(str(tmp_path / "un.tar.gz"), {"en-zh/UNv1.0.en-zh.en": [p[0] for p in un],
                                       "en-zh/UNv1.0.en-zh.zh": [p[1] for p in un]})
    blob = open(tmp_path / "un.tar.gz", "rb").read()
    (arch / "UNv1.0.en-zh.tar.gz.00").write_bytes(blob[: len(blob) // 2])
    (arch / "UNv1.0.en-zh.tar.gz.01").write_bytes(blob[len(blob) // 2:])
    os.makedirs(arch / "cwmt")
    (arch / "cwmt" / "casia2015.en").write_text("".join(p[0] + "\n" for p in cw))
    (arch / "cwmt" / "casia2015.zh").write_text("".join(p[1] + "\n" for p in cw))
    dev = [(a, _zh(b)) for a, b in _pairs(8, seed=12)]
    t17 = [(a, _zh(b)) for a, b in _pairs(9, seed=13)]
    t18 = [(a, _zh(b)) for a, b in _pairs(7, seed=14)]
    _tar(str(arch / "wmt17" / "dev.tgz"), {
        "dev/newsdev2017-enzh-src.en.sgm": _sgm([p[0] for p in dev], "newsdev2017", "en"),
        "dev/newsdev2017-enzh-ref.zh.sgm": _sgm([p[1] for p in dev], "newsdev2017", "zh")})
    for year, test in (("2017", t17), ("2018", t18)):
        _tar(str(arch / f"wmt{year[2:]}" / "test.tgz"), {
            f"test/newstest{year}-enzh-src.en.sgm": _sgm([p[0] for p in test], f"newstest{year}", "en"),
            f"test/newstest{year}-enzh-ref.zh.sgm": _sgm([p[1] for p in test], f"newstest{year}", "zh")})
    out = str(tmp_path / "enzh")
    # without the UN parts the recipe stops and names them
    os.rename(arch / "UNv1.0.en-zh.tar.gz.01", tmp_path / "part01")
    proc = run_recipe("prepare-wmt18-en-zh.sh", "--out", out, "--archives", str(arch), check=False)
    assert proc.returncode != 0 and "UNv1.0.en-zh.tar.gz.01 must be downloaded by hand" in proc.stderr
    os.rename(tmp_path / "part01", arch / "UNv1.0.en-zh.tar.gz.01")
    run_recipe("prepare-wmt18-en-zh.sh", "--out", out, "--archives", str(arch), "--en-bpe-merges", "300",
               "--zh-spm-vocab", "120")
    stats = _stats(out)
    assert stats["pairs"]["valid"] == 8 and stats["pairs"]["test"] == 9 and stats["pairs"]["test1"] == 7
    assert 100 <= stats["pairs"]["train"] <= 150
    assert stats["corpora"] == "news-commentary-v13,UNv1.0,cwmt/casia2015"
    assert not stats["joined_dictionary"]
    ev = stats["eval"]
    assert ev["sacrebleu_tokenize"] == "zh" and ev["detok"] == "none" and set(ev["test_sets"]) == {"test", "test1"}
    _check_binarized(out, "en", "zh", splits=("train", "valid", "test", "test1"))
    _check_gamma(out, "en", "zh", stats)
    assert "\u2581" in open(os.path.join(out, "bpe", "train.zh")).read()  # sentencepiece pieces


def test_prepare_wmt16_en_ro(tmp_path):
    """The hard-coded Gaussian paper's En-Ro: Europarl v8 + SETimes2 (a zip), newsdev2016 / newstest2016."""
    import zipfile

    arch = tmp_path / "archives"
    pairs = [(a, b.replace("e", "\u015f").replace("t", "\u0163")) for a, b in _pairs(180, seed=21)]  # ş ţ cedilla
    pairs[0] = ("", "Gol")  # an empty side: dropped by every preparation
    pairs[1] = ("Yes\uff0c really", " ".join(["foarte"] * 40))  # full-width comma; a ratio over 1.5
    _tar(str(arch / "training-parallel-ep-v8.tgz"), {
        "training-parallel-ep-v8/europarl-v8.ro-en.en": [p[0] for p in pairs[:100]],
        "training-parallel-ep-v8/europarl-v8.ro-en.ro": [p[1] for p in pairs[:100]]})
    with zipfile.ZipFile(arch / "en-ro.txt.zip", "w") as z:
        z.writestr("SETIMES.en-ro.en", "".join(p[0] + "\n" for p in pairs[100:160]))
        z.writestr("SETIMES.en-ro.ro", "".join(p[1] + "\n" for p in pairs[100:160]))
        z.writestr("README", "fixture")
    dev, test = pairs[160:170], pairs[170:]
    # the English of the ro-en direction's reference told apart from the en-ro source by a marker word
    _tar(str(arch / "wmt16" / "dev.tgz"), {
        "dev/newsdev2016-enro-src.en.sgm": _sgm([p[0] for p in dev], "newsdev2016", "en"),
        "dev/newsdev2016-roen-ref.en.sgm": _sgm(["Roen " + p[0] for p in dev], "newsdev2016", "en"),
        "dev/newsdev2016-enro-ref.ro.sgm": _sgm([p[1] for p in dev], "newsdev2016", "ro")})
    _tar(str(arch / "wmt16" / "test.tgz"), {
        "test/newstest2016-enro-src.en.sgm": _sgm([p[0] for p in test], "newstest2016", "en"),
        "test/newstest2016-roen-ref.en.sgm": _sgm(["Roen " + p[0] for p in test], "newstest2016", "en"),
        "test/newstest2016-enro-ref.ro.sgm": _sgm([p[1] for p in test], "newstest2016", "ro")})
    out = str(tmp_path / "enro")
    run_recipe("prepare-wmt16-en-ro.sh", "--out", out, "--archives", str(arch), "--bpe-merges", "300")
    stats = _stats(out)
    assert stats["pairs"]["valid"] == 10 and stats["pairs"]["test"] == 10
    assert 150 <= stats["pairs"]["train"] <= 158  # 160 pairs, the empty one and a few more dropped by the ratio
    assert stats["train_cleaning"] == "1-250 tokens, ratio 1.5"
    assert "Roen" not in open(os.path.join(out, "raw", "test.en")).read()  # newstest2016-enro-src.en.sgm
    assert "\uff0c" in open(os.path.join(out, "tok", "train.en")).read()  # no replace-unicode-punctuation
    assert (stats["dataset"], stats["bpe_merges"], stats["corpora"]) == ("wmt16_en_ro", "300",
                                                                        "europarl-v8.ro-en,SETIMES.en-ro")
    assert stats["joined_dictionary"] and stats["eval"]["target_lang"] == "ro"
    _check_binarized(out, "en", "ro")
    _check_gamma(out, "en", "ro", stats)
    # one spelling of the Romanian letters: comma below, in training data and references alike
    for path in (os.path.join(out, "tok", "train.ro"), os.path.join(out, "raw", "test.ro")):
        content = open(path, encoding="utf-8").read()
        assert "\u0219" in content and "\u021b" in content and "\u015f" not in content and "\u0163" not in content
    assert "@-@" in open(os.path.join(out, "tok", "train.en")).read()  # tokenizer.perl -a
    # --paper gaussian: the authors' process_enro.sh (normalise-romanian.py | remove-diacritics.py on the
    # Romanian train, dev and test sides, references included; no -a; MERGE_OPS=32000), its own dataset name
    out = str(tmp_path / "nodiac")
    run_recipe("prepare-wmt16-en-ro.sh", "--out", out, "--archives", str(arch), "--paper", "gaussian")
    stats = _stats(out)
    assert (stats["dataset"], stats["bpe_merges"], stats["romanian_diacritics"]) == (
        "wmt16_en_ro_nodiacritics", "32000", "removed")
    assert stats["pairs"]["valid"] == 10 and stats["pairs"]["test"] == 10
    # process_enro.sh / .py: only the pair with an empty side dropped, replace-unicode-punctuation, the English
    # of dev and test from *-roen-ref.en.sgm
    assert (stats["pairs"]["train"], stats["train_cleaning"]) == (159, "empty pairs only")
    train_en = open(os.path.join(out, "tok", "train.en"), encoding="utf-8").read()
    assert "Yes , really" in train_en and "\uff0c" not in train_en
    for split in ("valid", "test"):
        assert all(line.startswith("Roen ") for line in open(os.path.join(out, "raw", f"{split}.en")))
    for path in ("tok/train.ro", "tok/valid.ro", "raw/valid.ro", "raw/test.ro", "tok/test.ro"):
        content = open(os.path.join(out, path), encoding="utf-8").read()
        marked = "\u0218\u0219\u021a\u021b\u015e\u015f\u0162\u0163\u0102\u0103\u00c2\u00e2\u00ce\u00ee"
        assert not set(content) & set(marked), path
    assert "@-@" not in open(os.path.join(out, "tok", "train.en")).read()
    # BPE learned on the training data only (process_enro.sh line 64 learns it on dev and test as well)
    assert "learning 32000 BPE merges on " + os.path.join(out, "tok", "train.en") + " " + \
        os.path.join(out, "tok", "train.ro") + "\n" in run_recipe(
            "prepare-wmt16-en-ro.sh", "--out", out, "--archives", str(arch), "--paper", "gaussian").stderr


def test_romanian_letters_without_diacritics():
    """The WMT16 scripts' documented behaviour: normalise-romanian.py writes s/t with cedilla (U+015E/F, U+0162/3)
    with comma below (U+0218/9, U+021A/B); remove-diacritics.py writes s, t with comma below, a with breve, a and i
    with circumflex as s, t, a, a, i (either case). Nothing else changes."""
    from posnet_fairseq.data.text import romanian_line

    line = "\u015etiin\u0163\u0103 \u0219i \u021a\u0102R\u00c2 \u00een \u00ceNCHIS\u0102 \u00e2 \u201ex\u201d \u00e9"
    assert romanian_line(line) == ("\u0218tiin\u021b\u0103 \u0219i \u021a\u0102R\u00c2 \u00een \u00ceNCHIS\u0102 "
                                   "\u00e2 \u201ex\u201d \u00e9")
    assert romanian_line(line, remove_diacritics=True) == "Stiinta si TARA in INCHISA a \u201ex\u201d \u00e9"


@pytest.mark.parametrize("script,paper", [("prepare-wmt14-en-de.sh", "aan"), ("prepare-wmt14-en-fr.sh", "gaussian"),
                                          ("prepare-wmt16-en-ro.sh", "gaussian")])
def test_a_flag_the_preparation_does_not_have_is_refused(tmp_path, script, paper):
    """--paper and --bpe-merges pass (own_flags_only in recipes/lib/data.sh); any other flag is named, before
    anything is fetched."""
    result = run_recipe(script, "--paper", paper, "--bpe-merges", "100", "--out", str(tmp_path / "d"), "--foo", "1",
                        check=False)
    assert result.returncode != 0 and f"{script}: unknown option --foo" in result.stderr
    assert not (tmp_path / "d" / "orig").exists() or not os.listdir(tmp_path / "d" / "orig")


@pytest.mark.parametrize("script", ["prepare-synth.sh", "prepare-wmt16-en-ro.sh"])
def test_help_prints_the_usage_and_leaves_nothing_behind(tmp_path, script):
    """Issue 49 item 9: prepare-synth.sh --help was "unknown option --help" and left an empty data/synth/."""
    result = subprocess.run(["bash", os.path.join(REPO, "recipes", "data", script), "--help"], env=_env(),
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"bash recipes/data/{script}" in result.stdout and "--archives DIR" in result.stdout
    assert os.listdir(tmp_path) == []
