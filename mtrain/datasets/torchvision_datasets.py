"""torchvision's transforms and image classification datasets, by name, imported on first use.

Every ``torchvision.transforms.v2`` transform is a ``TRANSFORMS`` entry and
every image classification dataset a ``DATASETS`` entry under its own name.
What is registered here is a small :class:`LazyTorchvisionEntry` per name;
torchvision (~2.5 s to import) is imported only when a config builds one.
torchvision's models are ``'torchvision.<builder>'`` entries of ``MODELS``
(see :mod:`mtrain.models.torchvision_models`).

Config::

    data = dict(
        train=dict(type='ImageFolder', root='data/pets/train', pipeline=[
            dict(type='RandomResizedCrop', size=224),
            dict(type='RandomHorizontalFlip'),
            dict(type='ToImage'),
            dict(type='ToDtype', dtype='float32', scale=True),
            dict(type='Normalize', mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])]),
        val=dict(type='CIFAR10', root='data/cifar10', train=False, pipeline=[...]))

Datasets read local files only: ``download=True`` is a config error that says
where to put the files.
"""

import enum
import importlib
import inspect
import os.path as osp
import typing
from typing import Any, Callable, Dict, Optional

from ..registry import DATASETS, TRANSFORMS
from ..utils import ConfigError
from .image_classification import ImageClassificationDataset
from .pipeline import build_pipeline, to_dtype

#: ``torchvision.transforms.v2`` (0.29) transform classes; a test checks the
#: list against the installed torchvision.
TRANSFORM_NAMES = (
    'AugMix', 'AutoAugment', 'CenterCrop', 'ClampBoundingBoxes', 'ClampKeyPoints',
    'ColorJitter', 'Compose', 'ConvertBoundingBoxFormat', 'ConvertImageDtype', 'CutMix',
    'ElasticTransform', 'FiveCrop', 'GaussianBlur', 'GaussianNoise', 'Grayscale', 'Identity',
    'JPEG', 'Lambda', 'LinearTransformation', 'MixUp', 'Normalize', 'PILToTensor', 'Pad', 'RGB',
    'RandAugment', 'RandomAdjustSharpness', 'RandomAffine', 'RandomApply',
    'RandomAutocontrast', 'RandomChannelPermutation', 'RandomChoice', 'RandomCrop',
    'RandomEqualize', 'RandomErasing', 'RandomGrayscale', 'RandomHorizontalFlip',
    'RandomInvert', 'RandomIoUCrop', 'RandomOrder', 'RandomPerspective',
    'RandomPhotometricDistort', 'RandomPosterize', 'RandomResize', 'RandomResizedCrop',
    'RandomRotation', 'RandomShortestSize', 'RandomSolarize', 'RandomVerticalFlip',
    'RandomZoomOut', 'Resize', 'SanitizeBoundingBoxes', 'SanitizeKeyPoints', 'ScaleJitter',
    'SetClampingMode', 'TenCrop', 'ToDtype', 'ToImage', 'ToPILImage', 'ToPureTensor',
    'ToTensor', 'TrivialAugmentWide', 'UniformTemporalSubsample')

#: ``torchvision.datasets`` whose items are ``(image, class index)``.
DATASET_NAMES = (
    'ImageFolder', 'FakeData', 'CIFAR10', 'CIFAR100', 'MNIST', 'FashionMNIST', 'KMNIST',
    'EMNIST', 'QMNIST', 'USPS', 'SEMEION', 'SVHN', 'STL10', 'Caltech101', 'Caltech256',
    'Flowers102', 'Food101', 'DTD', 'FER2013', 'GTSRB', 'OxfordIIITPet', 'PCAM', 'Country211',
    'FGVCAircraft', 'EuroSAT', 'RenderedSST2', 'StanfordCars', 'SUN397', 'Places365',
    'ImageNet', 'Imagenette', 'INaturalist', 'CLEVRClassification', 'LFWPeople')

#: Transforms whose ``transforms`` argument is a list of transform configs.
_CONTAINERS = ('Compose', 'RandomApply', 'RandomChoice', 'RandomOrder')
#: Dataset arguments a config does not set: the pipeline replaces them.
_REPLACED = ('transform', 'target_transform', 'transforms')


class LazyTorchvisionEntry:
    """A registry entry for ``torchvision.<module>.<name>`` that imports torchvision when called.

    ``inspect.signature`` of the entry is the real class's (for a dataset:
    without ``transform*``, with ``pipeline``), so ``registry.build`` still
    rejects a misspelt argument and suggests the closest one.
    """

    def __init__(self, module: str, name: str, make: Callable[[type, Dict[str, Any]], Any]) -> None:
        self.module = module
        self.__name__ = self.__qualname__ = name
        self._make = make

    def target(self) -> type:
        """The torchvision class (imports torchvision)."""
        try:
            # Imported on first use, not at the top: torchvision takes seconds to
            # import and only configs that name one of its entries should pay for it.
            return getattr(importlib.import_module(self.module), self.__name__)
        except ImportError as e:
            raise ConfigError(f"'{self.__name__}' comes from torchvision, which cannot be "
                              f'imported ({e}); install it with `pip install torchvision`') from e

    @property
    def __signature__(self) -> inspect.Signature:
        signature = inspect.signature(self.target())
        if self.module != 'torchvision.datasets':
            return signature
        params = [p for p in signature.parameters.values() if p.name not in _REPLACED]
        pipeline = inspect.Parameter('pipeline', inspect.Parameter.KEYWORD_ONLY, default=None)
        at = len(params) - (params[-1].kind is inspect.Parameter.VAR_KEYWORD if params else 0)
        return signature.replace(parameters=params[:at] + [pipeline] + params[at:])

    def __call__(self, **kwargs) -> Any:
        return self._make(self.target(), kwargs)

    def __repr__(self) -> str:
        return f'<lazy {self.module}.{self.__name__}>'


def make_transform(cls: type, kwargs: Dict[str, Any]) -> Any:
    """Build a v2 transform: dtype and enum strings converted, nested ``transforms`` built."""
    params = inspect.signature(cls).parameters
    args = dict(kwargs)
    for name, value in kwargs.items():
        enum_cls = _enum_class(params[name]) if name in params else None
        if name == 'dtype':
            args[name] = to_dtype(value, key=name)
        elif name == 'transforms' and cls.__name__ in _CONTAINERS:
            args[name] = build_pipeline(value, key=name).steps
        elif enum_cls is not None and isinstance(value, str):
            args[name] = _to_enum(enum_cls, value, name)
    return cls(**args)


def _enum_class(param: inspect.Parameter) -> Optional[type]:
    """The Enum an argument takes (``InterpolationMode``, ``AutoAugmentPolicy``), if any."""
    if isinstance(param.default, enum.Enum):
        return type(param.default)
    for arg in typing.get_args(param.annotation):
        if isinstance(arg, type) and issubclass(arg, enum.Enum):
            return arg
    return None


def _to_enum(enum_cls: type, value: str, key: str) -> enum.Enum:
    """``'bilinear'`` → ``InterpolationMode.BILINEAR`` (by value or by member name)."""
    for member in enum_cls:
        if value.lower() in (str(member.value).lower(), member.name.lower()):
            return member
    choices = ', '.join(repr(str(m.value)) for m in enum_cls)
    raise ConfigError(f"'{value}' is not a {enum_cls.__name__}; use one of {choices}", key=key)


def make_dataset(cls: type, kwargs: Dict[str, Any]) -> ImageClassificationDataset:
    """Build a torchvision dataset from local files and wrap it with its pipeline."""
    args = dict(kwargs)
    pipeline_cfg = args.pop('pipeline', None)
    params = inspect.signature(cls).parameters
    name = cls.__name__
    if args.get('download'):
        raise ConfigError(
            f'{name}: download=True was requested, but mtrain does not download datasets. '
            f"Place {name}'s files under root={args.get('root')!r} (torchvision's layout for "
            f'{name}; its docs list the files) and remove download or set it to False',
            key='download')
    if 'download' in params:
        args['download'] = False  # a default of True (SEMEION) must not reach the network
    if 'root' in params:
        _check_root(name, args.get('root'))
        args['root'] = osp.expanduser(str(args['root']))
    pipeline = build_pipeline(pipeline_cfg or _DEFAULT_PIPELINE)
    try:
        dataset = cls(**args)
    except (FileNotFoundError, RuntimeError) as e:
        found = str(e).replace(' You can use download=True to download it', '').rstrip('.')
        raise ConfigError(f"{name} could not be read from root={args.get('root')!r}: {found}. "
                          f'{_LAYOUT_HINT.get(name, _LAYOUT_HINT[None])}', key='root') from e
    return ImageClassificationDataset(dataset, pipeline)


#: Without a pipeline, images become float tensors in [0, 1] so they can be batched.
_DEFAULT_PIPELINE = [dict(type='ToImage'), dict(type='ToDtype', dtype='float32', scale=True)]

_LAYOUT_HINT = {
    'ImageFolder': 'ImageFolder expects one sub-folder per class holding its images '
                   '(root/<class name>/<image>.png); point root (or data_root) at that folder',
    None: 'mtrain does not download datasets: place the files there in the layout the '
          'torchvision docs give for this dataset',
}


def _check_root(name: str, root: Any) -> None:
    if root is None:
        raise ConfigError(f'{name} needs root=<folder with its files>', key='root')
    if not osp.isdir(osp.expanduser(str(root))):
        raise ConfigError(f"{name}: the folder root={str(root)!r} does not exist. "
                          f'{_LAYOUT_HINT.get(name, _LAYOUT_HINT[None])} (override a config '
                          'location with --cfg-options data_root=/path)', key='root')


for _name in TRANSFORM_NAMES:
    TRANSFORMS.register_module(
        name=_name, module=LazyTorchvisionEntry('torchvision.transforms.v2', _name, make_transform))
for _name in DATASET_NAMES:
    DATASETS.register_module(
        name=_name, module=LazyTorchvisionEntry('torchvision.datasets', _name, make_dataset))
