"""The tests' yardstick for `data.verdict_table.read_verdicts`: every file, the store's too,
read record by record by the strict reader (`data.records.load_records`), as one table."""

from gamut_local.data import verdict_table as vt
from gamut_local.rundir import verdict_store
from gamut_local.rundir.identity import file_record


def read_verdicts_reference(paths) -> vt.VerdictTable:
    paths = vt.store_files(paths)
    tables, lines = vt.strict_tables(paths, [*vt.CODED, *verdict_store.PROB_COLUMNS])
    table = vt.table_of(tables, [str(p) for p in paths], [file_record(p) for p in paths], lines)
    vt.check_settings(table)
    return table
