# torchvision's ResNet-18 as the backbone of an ImageClassifier: its 1000-class fc layer is
# replaced by the head below (in_channels=512 is read from that layer).
model = dict(
    type='ImageClassifier',
    backbone=dict(type='torchvision.resnet18'),  # any torchvision.models builder name works
    head=dict(type='LinearClsHead', num_classes=1000),
    label_smoothing=0.0,
    pretrained=None)  # or a local .pth, e.g. torchvision's resnet18-f37072fd.pth
