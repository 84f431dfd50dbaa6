# The demo: a small CNN on scikit-learn's digits, >= 97% val accuracy in seconds on 2 CPU cores.
_base_ = [
    '../_base_/models/lenet.py', '../_base_/datasets/digits.py',
    '../_base_/schedules/sgd_cosine_10e.py', '../_base_/default_runtime.py'
]
seed = 0
