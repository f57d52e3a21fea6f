"""models/digits_cnn.py's sharded runs: which images a shard takes, and the merge of shard files."""
import json
import random

import pytest

from models.digits_cnn import merge, shard_images


def test_shards_cover_the_images_once():
    total = random.randint(50, 400)
    count, n = random.randint(1, total), random.randint(1, 6)
    shards = [shard_images(str(count), f"{k}/{n}", total) for k in range(n)]
    assert sorted(i for s in shards for i in s) == list(range(count))
    assert shard_images("all", "0/1", total) == list(range(total))
    assert shard_images(str(total + 5), "0/1", total) == list(range(total))
    with pytest.raises(SystemExit):
        shard_images("all", "3/3", total)


def _record(i, rng):
    label = rng.randrange(10)
    return {"index": i, "label": label, "float": rng.choice([label, (label + 1) % 10]),
            "simulated": rng.randrange(10), "encrypted": rng.randrange(10), "seconds": rng.random()}


def test_merge_adds_the_shards_up(tmp_path, capsys):
    rng = random.Random()
    rows = [_record(i, rng) for i in range(rng.randint(5, 40))]
    setting = {"preset": "p", "lut_tfhe": "t", "lut_bits": 6, "form": "product", "argmax": False, "device": "cuda"}
    paths = []
    for k in range(3):
        path = tmp_path / f"shard{k}.json"
        path.write_text(json.dumps(dict(setting, images=rows[k::3])))
        paths.append(str(path))
    out = merge(paths)
    n = len(rows)
    assert out["images"] == n and out["shards"] == 3 and out["setting"] == setting
    assert out["accuracy_float"] == sum(r["float"] == r["label"] for r in rows) / n
    assert out["accuracy_encrypted"] == sum(r["encrypted"] == r["label"] for r in rows) / n
    assert out["encrypted_eq_simulated"] == sum(r["encrypted"] == r["simulated"] for r in rows)
    assert out["median_seconds"] == sorted(r["seconds"] for r in rows)[n // 2]
    assert f"{n} images in 3 shards" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # an image in two shards
        merge(paths + paths[:1])
    other = tmp_path / "other.json"
    other.write_text(json.dumps(dict(setting, lut_bits=4, images=[_record(len(rows), rng)])))
    with pytest.raises(SystemExit):  # another grid
        merge(paths + [str(other)])
