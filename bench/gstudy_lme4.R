# Timed variant of tests/r/lme4_components.R for bench/gstudy.py: the same lmer fit
# (REML, bobyqa, maxfun 1e6, calc.derivs = FALSE), with system.time of each step.
# Usage: Rscript bench/gstudy_lme4.R data.csv "score ~ 1 + (1|s) + ..." out.json
# Writes {"library": {...}, "read": {...}, "lmer": {...}, "feval": n, "components": {...}}
# with elapsed/user/system seconds per step.
t_lib <- system.time(suppressPackageStartupMessages(library(lme4)))
args <- commandArgs(trailingOnly = TRUE)
t_read <- system.time({
  data <- read.csv(args[1], colClasses = "character")
  data$score <- as.numeric(data$score)
})
t_fit <- system.time(
  fit <- lmer(as.formula(args[2]), data = data, REML = TRUE,
              control = lmerControl(optimizer = "bobyqa", optCtrl = list(maxfun = 1e6),
                                    calc.derivs = FALSE))
)
vc <- as.data.frame(VarCorr(fit))
timing <- function(t) {
  sprintf('{"elapsed": %.4f, "user": %.4f, "system": %.4f}',
          t[["elapsed"]], t[["user.self"]] + t[["user.child"]], t[["sys.self"]] + t[["sys.child"]])
}
components <- paste0('"', vc$grp, '": ', sprintf("%.15g", vc$vcov), collapse = ", ")
feval <- fit@optinfo$feval
out <- file(args[3], "w")
cat(sprintf('{"library": %s, "read": %s, "lmer": %s, "feval": %s, "components": {%s}}\n',
            timing(t_lib), timing(t_read), timing(t_fit),
            if (is.null(feval)) "null" else as.character(feval), components), file = out)
close(out)
