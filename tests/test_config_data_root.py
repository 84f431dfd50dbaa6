"""``--cfg-options data_root=...`` moves every data path written relative to ``data_root``."""

import textwrap

from mtrain.config import load_config, parse_cfg_options


def test_overriding_data_root_moves_the_dataset_paths(tmp_path):
    path = tmp_path / 'c.py'
    path.write_text(textwrap.dedent("""
        data_root = 'data/pets'
        data = dict(train=dict(type='ImageFolder', root=data_root + '/train'),
                    val=dict(type='ImageFolder', root=data_root + '/val',
                             extra=[data_root, 'data/petshop/x', 'elsewhere/data/pets']))
        work_dir = data_root + '/work'
    """))
    cfg = load_config(str(path), parse_cfg_options(['data_root=/mnt/imgs']))
    assert cfg.data_root == '/mnt/imgs'
    assert cfg.data.train.root == '/mnt/imgs/train' and cfg.data.val.root == '/mnt/imgs/val'
    assert cfg.data.val.extra == ['/mnt/imgs', 'data/petshop/x', 'elsewhere/data/pets']
    assert cfg.work_dir == 'data/pets/work'  # only data paths move
    assert load_config(str(path)).data.train.root == 'data/pets/train'
