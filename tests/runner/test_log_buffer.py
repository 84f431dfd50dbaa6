import torch

from mtrain.runner import LogBuffer


def test_weighted_mean_over_an_interval():
    buf = LogBuffer()
    buf.update({'loss': torch.tensor(1.0), 'time': 0.5}, count=2)
    buf.update({'loss': torch.tensor(4.0), 'time': 1.5}, count=1)
    buf.average()
    assert buf.ready
    assert buf.output['loss'] == 2.0  # (1*2 + 4*1) / 3
    assert abs(buf.output['time'] - (0.5 * 2 + 1.5) / 3) < 1e-12


def test_average_consumes_sums_so_memory_stays_bounded():
    buf = LogBuffer()
    for i in range(1000):
        buf.update({'loss': torch.tensor(float(i))})
    assert len(buf.pending('loss')) == 1000
    buf.average()
    assert buf.pending('loss') == [] and buf.output['loss'] == 499.5
    buf.average()  # a second logger in the same interval sees the same values
    assert buf.output['loss'] == 499.5
    buf.clear()
    assert buf.output == {} and not buf.ready


def test_state_dict_round_trip():
    buf = LogBuffer()
    buf.update({'loss': torch.tensor(3.0)}, 4)
    other = LogBuffer()
    other.load_state_dict(buf.state_dict())
    other.average()
    assert other.output['loss'] == 3.0


def test_unaveraged_keys_are_folded_so_memory_stays_bounded():
    buf = LogBuffer()
    values = [1.0 + (i % 2) for i in range(LogBuffer.max_pending * 2 + 5)]
    for v in values:
        buf.update({'loss': torch.tensor(v)}, count=1)
    assert len(buf.pending('loss')) < 10
    buf.average()
    assert abs(buf.output['loss'] - sum(values) / len(values)) < 1e-9


def test_update_does_not_compute_on_the_values():
    buf = LogBuffer()
    t = torch.tensor(2.0)
    buf.update({'loss': t})
    assert buf.pending('loss')[0] is t  # a reference, no copy, no op


def test_numbers_and_tensors_mixed_in_one_key_average_exactly():
    buf = LogBuffer()
    buf.update({'acc': 0.5, 'loss': torch.tensor([2.0])}, count=1)  # a 1-element tensor is fine
    buf.update({'acc': torch.tensor(1.0), 'loss': torch.tensor(4.0)}, count=3)
    buf.average()
    assert buf.output == {'acc': (0.5 + 3.0) / 4, 'loss': (2.0 + 12.0) / 4}


def test_a_logged_vector_is_a_clear_error():
    import pytest
    with pytest.raises(ValueError, match="'per_class' has shape \\(3,\\)"):
        LogBuffer().update({'per_class': torch.ones(3)})


def test_reduce_fn_sees_every_sum_and_count_by_name():
    seen = []

    def reduce_fn(totals):
        seen.append(dict(totals))
        return {k: (2 * s, 2 * c) for k, (s, c) in totals.items()}  # the means do not change

    buf = LogBuffer()
    buf.update({'loss': torch.tensor(1.0), 'time': 0.25}, count=4)
    buf.average(reduce_fn)
    assert seen == [{'loss': (4.0, 4), 'time': (1.0, 4)}]
    assert buf.output == {'loss': 1.0, 'time': 0.25}


def test_a_watcher_sees_every_value_once_as_it_leaves():
    """At average (host numbers and the all-rank total), at clear and at a fold (as logged)."""
    seen = []
    buf = LogBuffer()
    buf.max_pending = 8
    buf.watch('loss', lambda values, total: seen.append(
        ([float(v) for v in values], total, all(isinstance(v, float) for v in values))))
    for i in range(3):
        buf.update({'loss': torch.tensor(float(i)), 'acc': torch.tensor(1.)}, 2)
    buf.average()
    assert seen == [([0., 1., 2.], 6.0, True)]  # total: the weighted sum (count 2 each)
    buf.update({'loss': torch.tensor(5.)})
    buf.clear()
    assert seen[-1] == ([5.], None, False)
    for i in range(8):
        buf.update({'loss': torch.tensor(float(i))})
    assert seen[-1] == ([float(i) for i in range(8)], None, False)  # folded at max_pending
    buf.update({'loss': torch.tensor(9.)})
    buf.average()  # the folded entry is not shown again
    assert seen[-1][0] == [9.] and len(seen) == 4


def test_average_of_opposite_infinities_is_nan_not_an_error():
    buf = LogBuffer()
    buf.update({'loss': torch.tensor(float('inf'))})
    buf.update({'loss': torch.tensor(float('-inf'))})
    buf.average()
    assert buf.output['loss'] != buf.output['loss']  # NaN


def test_a_resumed_buffer_averages_each_keys_latest_values_as_the_uninterrupted_one():
    # The checkpoint keeps every value apart (and the history): a line over the latest n
    # values counts them as the run that was not interrupted does.
    buf = LogBuffer()
    for i in range(5):
        buf.update({'loss': torch.tensor(float(i))}, count=2)
        if i % 2 == 0:
            buf.update({'aux': torch.tensor(10.0 + i)}, count=2)
        if i == 1:
            buf.average_interval(n=2)
    resumed = LogBuffer()
    resumed.load_state_dict(buf.state_dict())
    assert resumed.restored and not buf.restored
    for b in (buf, resumed):
        b.update({'loss': torch.tensor(5.0)}, count=2)
        b.average_interval(n=2)
    assert resumed.output == buf.output == {'loss': 4.5, 'aux': 13.0}
    assert not resumed.restored  # (the first line has used the checkpoint's values)


def test_an_older_checkpoints_one_mean_per_key_still_loads():
    buf = LogBuffer()
    buf.load_state_dict({'values': {'loss': torch.tensor(3.0, dtype=torch.float64)},
                         'counts': {'loss': 4}})
    buf.update({'loss': torch.tensor(1.0)}, 4)
    buf.average_interval()
    assert buf.output['loss'] == 2.0
