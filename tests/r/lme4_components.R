# Fit a balanced random-effects design with lme4 (REML) and print its variance components as JSON.
# Usage: Rscript lme4_components.R data.csv "score ~ 1 + (1|s) + ..." out.json
# The optimizer settings follow the G-study issue: the default optimizer can stop a few
# percent short on crossed designs of a few thousand records; bobyqa with a large budget
# reaches the EMS solution.
suppressPackageStartupMessages(library(lme4))
args <- commandArgs(trailingOnly = TRUE)
data <- read.csv(args[1], colClasses = "character")
data$score <- as.numeric(data$score)
fit <- lmer(as.formula(args[2]), data = data, REML = TRUE,
            control = lmerControl(optimizer = "bobyqa", optCtrl = list(maxfun = 1e6),
                                  calc.derivs = FALSE))
vc <- as.data.frame(VarCorr(fit))
out <- file(args[3], "w")
cat("{", file = out)
cat(paste0('"', vc$grp, '": ', sprintf("%.15g", vc$vcov), collapse = ", "), file = out)
cat("}\n", file = out)
close(out)
