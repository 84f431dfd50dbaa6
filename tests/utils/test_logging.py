"""The mtrain logger: the console and the log file get the same lines, each record formatted once."""

import gc
import logging
import sys
import weakref

import pytest

from mtrain.utils import get_logger


@pytest.fixture
def logger_to(tmp_path):
    """A fresh mtrain logger writing to the console and to ``tmp_path/run.log``."""
    name = f'mtrain.test_logging.{tmp_path.name}'
    logger = get_logger(name, log_file=str(tmp_path / 'run.log'))
    yield logger, tmp_path / 'run.log'
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


def test_console_and_file_get_every_record_in_order(logger_to, capsys):
    logger, path = logger_to
    capsys.readouterr()
    for message in ('first', 'second', 'second', 'lr: 1.000e-02'):
        logger.info(message)
    logger.warning('last')
    on_file = path.read_text().splitlines()
    assert capsys.readouterr().err.splitlines() == on_file
    assert [line.rsplit(' - ', 1)[1] for line in on_file] == [
        'first', 'second', 'second', 'lr: 1.000e-02', 'last']
    assert ' - WARNING - ' in on_file[-1] and ' - INFO - ' in on_file[0]


def test_a_record_is_formatted_once_for_both_handlers(logger_to, monkeypatch):
    logger, _ = logger_to
    shared = own_handlers(logger)[0].formatter
    assert all(handler.formatter is shared for handler in own_handlers(logger))
    calls = []
    original = logging.Formatter.format
    monkeypatch.setattr(logging.Formatter, 'format', lambda self, record: (
        self is shared and calls.append(record.msg)) or original(self, record))
    logger.info('one')
    logger.info('two')
    assert calls == ['one', 'two']


def test_a_record_with_a_traceback_is_not_kept(logger_to):
    """The formatter remembers its last record weakly: a traceback's frames are let go."""
    logger, _ = logger_to
    formatter = own_handlers(logger)[0].formatter
    refs = []

    class Marker:
        pass

    def fail():
        marker = Marker()  # (held by the traceback's frame)
        refs.append(weakref.ref(marker))
        raise ValueError('boom')

    try:
        fail()
    except ValueError:
        record = logger.makeRecord(logger.name, logging.ERROR, __file__, 1, 'failed', (),
                                   sys.exc_info())
    text = formatter.format(record)
    assert 'ValueError: boom' in text and formatter.format(record) == text
    del record
    gc.collect()
    assert refs[0]() is None


def own_handlers(logger):
    """mtrain's console and file handlers (the test runner may add its own)."""
    return [h for h in logger.handlers if type(h).__name__ in ('_StderrHandler', 'FileHandler')]
