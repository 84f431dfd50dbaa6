# A search space for the digits demo: python tools/sweep.py configs/digits/lenet_digits.py
#     --space configs/digits/lr_space.py --trials 12   (docs/sweeps.md)
# Keys are config keys as --cfg-options takes them; a list means "one of these values".
space = {
    'optimizer.lr': loguniform(1e-4, 1.0),  # the demo's 0.1 is near the middle, in log scale
    'optimizer.momentum': uniform(0.5, 0.95),
    'optimizer.weight_decay': [0, 1e-4, 5e-4],
}
