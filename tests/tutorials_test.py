"""JAX's own tutorials under minijax (tools/tutorials.py): one short page, run cell by cell
under both modules, prints the same in every cell.

The full run over every page, with its figures, is documented in docs/conformance.md; this
keeps its tool working and one page's share true. The JAX side runs in a child process too
(its outputs are cached in ~/.cache/minijax-tutorials after the first run).
"""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import tutorials  # noqa: E402

CELLS = json.loads(tutorials.CELLS.read_text())


def test_the_cells_file_is_the_extract_of_the_named_pages():
    assert CELLS["license"].startswith("Apache-2.0")
    assert set(CELLS["pages"]) == set(tutorials.PAGES)
    for name, (path, _) in tutorials.PAGES.items():
        assert CELLS["pages"][name]["path"] == "docs/" + path
        assert CELLS["pages"][name]["cells"], name


def test_cells_of_reads_myst_code_cells_with_their_tags():
    page = ("# t\n\n```{code-cell} ipython3\n:id: x\n:tags: [raises-exception]\n\n1 + 1\n```\n"
            "text\n```{code-cell}\n---\ntags: [hide-output]\n---\nprint(2)\n```\n"
            "```python\nnot a cell\n```\n")
    assert tutorials.cells_of(page) == [
        {"source": "1 + 1", "tags": ["raises-exception"]},
        {"source": "print(2)", "tags": ["hide-output"]}]


def test_the_import_mapping_and_the_comparison():
    assert tutorials.minijax_name("jax.numpy") == "minijax.numpy"
    assert tutorials.minijax_name("jax._src.util") == "minijax.util"
    assert tutorials.minijax_name("jax._src.lib.mlir.dialects") == "jax._src.lib.mlir.dialects"
    assert tutorials.minijax_name("numpy") == "numpy"
    assert tutorials.normalise("<f at 0x7f3a2b1c9d>, 1.5 ms") == "<f at 0x…>, <time>"
    assert tutorials.equal_up_to_rounding("[0.84147096 1.]", "[0.841471   1.]")
    assert not tutorials.equal_up_to_rounding("[0.84 1.]", "[0.85 1.]")


@pytest.mark.slow
def test_a_page_prints_the_same_in_every_cell():
    name = "stateful-computations"
    result = tutorials.compare_page(name, CELLS["pages"][name]["cells"], timeout=300)
    assert "failed" not in result, result
    summary = tutorials.summary(result)
    assert summary["cells"] == len(CELLS["pages"][name]["cells"]) == 6
    assert summary["identical"] == summary["cells"], [
        c for c in result["cells"] if c["verdict"] != "identical"]
