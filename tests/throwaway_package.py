"""A throwaway OpenMMLab-style package of configs, for package-scoped ``_base_`` tests."""


def write_package(root, name='mmyolo'):
    """``root/<name>`` with ``.mim/configs/_base_/schedule.py``, itself based on ``./optim.py``."""
    configs = root / name / '.mim' / 'configs' / '_base_'
    configs.mkdir(parents=True)
    (root / name / '__init__.py').write_text('')
    (root / name / '.mim' / 'model-index.yml').write_text('Import: []\n')
    (configs / 'optim.py').write_text(
        "optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=0.02, "
        'momentum=0.9))\n')
    (configs / 'schedule.py').write_text(
        "_base_ = ['./optim.py']\n"
        "param_scheduler = [dict(type='LinearLR', start_factor=0.1, by_epoch=False, end=5),\n"
        "                   dict(type='MultiStepLR', milestones=[2], by_epoch=True)]\n"
        "train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=3)\n")
    return root
