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
