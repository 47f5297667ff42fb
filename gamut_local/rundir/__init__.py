"""The run directory: its file names and shards (`layout`), JSONL reading and atomic writes
(`store`), resume keys and settings hashes (`resume`), and `manifest.json` (`manifest`).

May import `config`, `prompts`, `engines` (backend lookup only), `vocab` and `errors`.
"""
