# Fit one large incomplete data set with lme4 (REML) for tests/r/make_lme4_incomplete.py.
#
# Usage: Rscript tests/r/lme4_incomplete.R data.csv "score ~ 1 + (1|s) + ..." out.json
#
# The fit settings are those of lme4_components.R and make_lme4_reference.R (REML,
# bobyqa, maxfun 1e6, calc.derivs FALSE). Writes the R and lme4 versions, the rows
# read, lmer's elapsed seconds, its function evaluations, singularity, convergence
# messages, the REML criterion and the variance components by lme4 group name.
# Only base R and lme4 (no jsonlite).
suppressPackageStartupMessages(library(lme4))
args <- commandArgs(trailingOnly = TRUE)
if (length(args) != 3) stop("usage: Rscript lme4_incomplete.R DATA.csv FORMULA OUT.json")
data <- read.csv(args[1], colClasses = "character")
data$score <- as.numeric(data$score)
elapsed <- system.time(
  fit <- lmer(as.formula(args[2]), data = data, REML = TRUE,
              control = lmerControl(optimizer = "bobyqa", optCtrl = list(maxfun = 1e6),
                                    calc.derivs = FALSE))
)[["elapsed"]]
quote <- function(x) paste0('"', gsub('"', '\\\\"', gsub("\\\\", "\\\\\\\\", x)), '"')
number <- function(x) sprintf("%.15g", x)
vc <- as.data.frame(VarCorr(fit))
messages <- c(fit@optinfo$conv$lme4$messages, fit@optinfo$warnings)
feval <- fit@optinfo$feval
out <- file(args[3], "w")
cat("{\n",
    "  \"r_version\": ", quote(R.version.string), ",\n",
    "  \"lme4_version\": ", quote(as.character(packageVersion("lme4"))), ",\n",
    "  \"fit\": \"lmer REML, optimizer bobyqa, maxfun 1e6, calc.derivs FALSE\",\n",
    "  \"rows\": ", nrow(data), ",\n",
    "  \"lmer_seconds\": ", number(elapsed), ",\n",
    "  \"feval\": ", if (is.null(feval)) "null" else as.character(feval), ",\n",
    "  \"singular\": ", if (isSingular(fit)) "true" else "false", ",\n",
    "  \"messages\": [", paste(vapply(as.character(unlist(messages)), quote, ""), collapse = ", "), "],\n",
    "  \"reml_criterion\": ", number(REMLcrit(fit)), ",\n",
    "  \"components\": {", paste0(quote(vc$grp), ": ", number(vc$vcov), collapse = ", "), "}\n",
    "}\n", sep = "", file = out)
close(out)
