"""The demo conversations in ``sample_data/`` and a loader that puts them into a store."""
from pathlib import Path

from .errors import ConflictError
from .io import import_session, read_export

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "sample_data"


def sample_files(directory=SAMPLE_DIR):
    """The session export files of the sample data, sorted by name."""
    return sorted(Path(directory).glob("*.json"))


def load_samples(store, *, replace=False, directory=SAMPLE_DIR):
    """Import every sample session; returns the ids imported (existing ones are kept unless ``replace``)."""
    files = sample_files(directory)
    if not files:
        raise FileNotFoundError(f"no sample sessions (*.json) in {directory}")
    loaded = []
    for path in files:
        try:
            loaded.append(import_session(store, read_export(path), replace=replace).session_id)
        except ConflictError:
            continue
    return loaded
