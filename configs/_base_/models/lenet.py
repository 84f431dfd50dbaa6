model = dict(type='LeNet', num_classes=10, in_channels=1, width=32)
