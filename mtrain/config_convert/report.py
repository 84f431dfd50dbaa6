"""What a conversion did, key by key: the report ``tools/convert_config.py`` prints."""

from dataclasses import dataclass, field
from typing import List

#: Entry kinds, from harmless to lossy.
EXACT, NOTE, LOSSY = 'exact', 'note', 'lossy'


@dataclass
class Entry:
    """One source key and what became of it.

    ``kind`` is ``'exact'`` (same numbers and behaviour), ``'note'`` (same
    behaviour, but written differently for a reason worth knowing, e.g. a
    default made explicit) or ``'lossy'`` (no counterpart, or the meaning
    changes: ``reason`` says exactly how).
    """

    source: str
    target: str
    kind: str = EXACT
    reason: str = ''


@dataclass
class ConversionReport:
    """The entries of one conversion, in the order the keys were read."""

    source_schema: str
    target_schema: str
    entries: List[Entry] = field(default_factory=list)

    def exact(self, source: str, target: str) -> None:
        self.entries.append(Entry(source, target))

    def note(self, source: str, target: str, reason: str) -> None:
        self.entries.append(Entry(source, target, NOTE, reason))

    def lossy(self, source: str, target: str, reason: str) -> None:
        self.entries.append(Entry(source, target, LOSSY, reason))

    @property
    def lossy_entries(self) -> List[Entry]:
        return [e for e in self.entries if e.kind == LOSSY]

    @property
    def is_lossy(self) -> bool:
        return bool(self.lossy_entries)

    def format(self) -> str:
        """A plain-text table: ``[exact] lr_config -> param_scheduler`` plus reasons."""
        lines = [f'{self.source_schema} -> {self.target_schema}: {len(self.entries)} keys, '
                 f'{len(self.lossy_entries)} lossy']
        for e in self.entries:
            lines.append(f'  [{e.kind}] {e.source} -> {e.target or "(dropped)"}')
            if e.reason:
                lines.append(f'      {e.reason}')
        return '\n'.join(lines)
