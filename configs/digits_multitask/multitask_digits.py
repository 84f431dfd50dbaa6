# Multitask demo: digits split into two tasks with their own labels ("low": 0-4, "high": 5-9),
# a shared CNN backbone and one head per task. Each step forwards and backwards one batch of
# each task (MultiBatchProcessor) and then applies one update from the sum of their gradients.
# Reaches >= 97% val accuracy on each task in 4 epochs (about 10 s on 2 CPU cores).
_base_ = ['../_base_/default_runtime.py']
seed = 0
digit_tasks = dict(low=[0, 1, 2, 3, 4], high=[5, 6, 7, 8, 9])
model = dict(type='MultiTaskClassifier', tasks=dict(low=5, high=5), width=16)
data = dict(
    samples_per_gpu=32,  # per task: a step sees 32 "low" and 32 "high" images
    workers_per_gpu=0,
    # zip: each item is a tuple (one sample per task) and the loader yields a tuple of batches
    train=dict(type='MultiTaskDigitsDataset', tasks=digit_tasks, split='train'),
    # concat: all val images once; evaluate() reports low.accuracy, high.accuracy and the mean
    val=dict(type='MultiTaskDigitsDataset', tasks=digit_tasks, split='val', mode='concat'),
    test=dict(type='MultiTaskDigitsDataset', tasks=digit_tasks, split='test', mode='concat'))
# 'sum': each task's loss at full weight, as in the multitask objective L = L_low + L_high.
batch_processor = dict(type='MultiBatchProcessor', loss_reduction='sum')
find_unused_parameters = True  # under DDP: each batch leaves the other task's head unused
optimizer = dict(type='SGD', lr=0.05, momentum=0.9, weight_decay=5e-4, nesterov=True)
optimizer_config = dict(grad_clip=None)
# Any torch.optim.lr_scheduler class; '{num_updates}' is filled in once the loader exists.
lr_config = dict(policy='Torch', scheduler=dict(type='OneCycleLR', max_lr=0.1,
                                                total_steps='{num_updates}', pct_start=0.2))
runner = dict(type='EpochBasedRunner', max_epochs=4)
evaluation = dict(interval=1, metric='accuracy', save_best='accuracy')
log_config = dict(interval=5)  # the default hooks: text log and progress bar
