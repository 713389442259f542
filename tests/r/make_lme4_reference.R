# Freeze lme4's REML variance components for the committed data sets of tests/test_vs_lme4.py.
#
# Usage (from the repository root):
#   Rscript tests/r/make_lme4_reference.R tests/data/lme4 tests/data/lme4_reference.json
#
# The folder holds cases.csv (columns case, spec, seed, data, formula: one row per data
# set) and the data sets it names (one row per observation: a label column per facet,
# then score). `uv run python tests/test_vs_lme4.py` writes both and then runs this
# script. The fit settings are those of lme4_components.R (REML, bobyqa with a large
# budget: the default optimizer can stop a few percent short on crossed designs).
# Only base R and lme4 are used (CI installs r-base-core and r-cran-lme4, no jsonlite).
suppressPackageStartupMessages(library(lme4))
args <- commandArgs(trailingOnly = TRUE)
if (length(args) != 2) stop("usage: Rscript make_lme4_reference.R DATA_FOLDER OUT.json")
folder <- args[1]
cases <- read.csv(file.path(folder, "cases.csv"), colClasses = "character")

quote <- function(x) paste0('"', gsub('"', '\\\\"', gsub("\\\\", "\\\\\\\\", x)), '"')
number <- function(x) sprintf("%.15g", x)

entries <- character(0)
for (k in seq_len(nrow(cases))) {
  case <- cases[k, ]
  data <- read.csv(file.path(folder, case$data), colClasses = "character")
  data$score <- as.numeric(data$score)
  fit <- lmer(as.formula(case$formula), data = data, REML = TRUE,
              control = lmerControl(optimizer = "bobyqa", optCtrl = list(maxfun = 1e6),
                                    calc.derivs = FALSE))
  vc <- as.data.frame(VarCorr(fit))
  messages <- c(fit@optinfo$conv$lme4$messages, fit@optinfo$warnings)
  components <- paste0(quote(vc$grp), ": ", number(vc$vcov), collapse = ", ")
  entries <- c(entries, paste0(
    "    ", quote(case$case), ": {\n",
    "      \"spec\": ", quote(case$spec), ",\n",
    "      \"seed\": ", case$seed, ",\n",
    "      \"data\": ", quote(case$data), ",\n",
    "      \"formula\": ", quote(case$formula), ",\n",
    "      \"rows\": ", nrow(data), ",\n",
    "      \"singular\": ", if (isSingular(fit)) "true" else "false", ",\n",
    "      \"messages\": [", paste(vapply(as.character(unlist(messages)), quote, ""), collapse = ", "), "],\n",
    "      \"reml_criterion\": ", number(REMLcrit(fit)), ",\n",
    "      \"components\": {", components, "}\n",
    "    }"
  ))
  cat(case$case, ": ", nrow(data), " rows fitted\n", sep = "")
}

out <- file(args[2], "w")
cat("{\n", file = out)
cat("  \"r_version\": ", quote(R.version.string), ",\n", sep = "", file = out)
cat("  \"lme4_version\": ", quote(as.character(packageVersion("lme4"))), ",\n", sep = "", file = out)
cat("  \"fit\": \"lmer REML, optimizer bobyqa, maxfun 1e6, calc.derivs FALSE\",\n", file = out)
cat("  \"cases\": {\n", paste(entries, collapse = ",\n"), "\n  }\n}\n", sep = "", file = out)
close(out)
