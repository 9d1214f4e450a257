"""gin glue: load experiment files and ``-b`` bindings, explain every error in one line.

`parse` is the one way flowkit reads a config:

1. every built-in component module and installed plugin is imported first
   (`flowkit.registry.load_plugins`), because gin only knows configurables that exist;
2. ``include 'x.gin'`` is resolved against the *including file's* directory first, then
   the working directory, ``./gin`` and the repository's ``gin/`` (gin itself resolves
   against the working directory only, gin-config #104), so an experiment includes its
   base file from wherever it is run;
3. files are parsed in include order, then the command-line bindings, which come last
   and so override the files; each file applies once, where it is first read, so a file
   given twice on the command line (or given after a file that already included it) is
   refused: its second mention would change nothing;
4. gin's errors become a `ConfigError` naming the file and line, the offending text and,
   for a misspelled component or parameter, the closest registered names; a required
   value left unset, an undefined macro, a value of the wrong type and (through
   `one_line`) a value a component refuses when it is built name the file and line of
   the binding (`where_bound`).

gin is global state: parse once per process (tests clear it between cases) and hand
worker processes the bindings explicitly (`ParsedConfig.sources` carries the exact text).

A config is data: before gin runs any statement, an ``import`` of a module no installed
plugin declares, and an ``include`` of anything but a ``.gin`` file, are refused
(`flowkit.config.trust`); a plugin is the way to bring code.

One module per concern: `files` (search path, includes), `parsing` (`parse`,
`config_text`), `checks` (required values, macros, types), `messages` (gin's errors as
one line), `sources` (`where_bound`), `names` (configurable names, "did you mean"),
`diff` (`config_diff`), `trust` (imports and includes checked before parsing). What the
rest of flowkit uses is importable from here.
"""

from __future__ import annotations

from flowkit.config.diff import ConfigDiff, config_diff
from flowkit.config.files import resolve_config_file, search_path
from flowkit.config.messages import one_line
from flowkit.config.parsing import ParsedConfig, config_text, parse, parse_bindings
from flowkit.config.sources import where_bound

__all__ = [
    "ConfigDiff",
    "ParsedConfig",
    "config_diff",
    "config_text",
    "one_line",
    "parse",
    "parse_bindings",
    "resolve_config_file",
    "search_path",
    "where_bound",
]
