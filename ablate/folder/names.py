"""The names of a run folder's files and folders (``ablate.folder.layout.RunFolder`` joins them): a module
without models, so the miner finds run folders without loading pydantic."""

MANIFEST = "manifest.json"
PLAN = "plan.jsonl"
RESULTS = "results"
STDOUT = "stdout"
STDERR = "stderr"
TRANSCRIPTS = "transcripts"
LOCK = ".lock"
#: Folder inside a run folder holding a copy of every task file, so a resume needs nothing else.
TASKS_DIR = "tasks"
GRADES = "grades"
DIFFS = "diffs"
REPORT_JSON = "report.json"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
REPORT_LOG = "report.log"
PLOTS = "plots"
