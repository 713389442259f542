# Fit the latent-scale G-study models with lme4::glmer (binomial, logit, Laplace: nAGQ = 1)
# or ordinal::clmm (cumulative link, Laplace) and write their components as JSON.
# Usage: Rscript latent_reference.R data.csv cases.csv out.json
# data.csv: columns case, s, i, j, y (one row per judgment, y the 0-based category);
# cases.csv: columns case, method (glmer | clmm), link (logit | probit), terms ("s+i+j+si+sj+ij").
suppressPackageStartupMessages({library(lme4); library(ordinal)})
args <- commandArgs(trailingOnly = TRUE)
data <- read.csv(args[1], colClasses = c("character", "character", "character", "character", "integer"))
cases <- read.csv(args[2], colClasses = "character")
term_of <- function(t) paste0("(1|", paste(strsplit(t, "")[[1]], collapse = ":"), ")")
out <- character(0)
for (n in seq_len(nrow(cases))) {
  cs <- cases[n, ]
  d <- data[data$case == cs$case, ]
  for (f in c("s", "i", "j")) d[[f]] <- factor(d[[f]])
  terms <- strsplit(cs$terms, "\\+")[[1]]
  rhs <- paste(vapply(terms, term_of, ""), collapse = " + ")
  elapsed <- system.time({
    if (cs$method == "glmer") {
      fit <- glmer(as.formula(paste("y ~ 1 +", rhs)), data = d, family = binomial(link = cs$link), nAGQ = 1,
                   control = glmerControl(optimizer = "bobyqa", tolPwrss = 1e-10,
                                         optCtrl = list(maxfun = 1e5, rhoend = 1e-9)))
      vc <- as.data.frame(VarCorr(fit))
      comps <- setNames(vc$vcov, vc$grp)
      thr <- -unname(fixef(fit)[1])
      ll <- as.numeric(logLik(fit))
    } else {
      d$yo <- factor(d$y, ordered = TRUE)
      fit <- clmm(as.formula(paste("yo ~ 1 +", rhs)), data = d, link = cs$link, Hess = FALSE,
                  control = clmm.control(gradTol = 1e-7, maxIter = 1000))
      comps <- sapply(fit$ST, function(st) st[1, 1]^2)
      thr <- unname(fit$alpha)
      ll <- as.numeric(logLik(fit))
    }
  })[["elapsed"]]
  names(comps) <- gsub(":", "", names(comps))
  comp_json <- paste0('"', names(comps), '": ', sprintf("%.12g", comps), collapse = ", ")
  out <- c(out, sprintf('"%s": {"components": {%s}, "thresholds": [%s], "loglik": %.12g, "seconds": %.4g}',
                        cs$case, comp_json, paste(sprintf("%.12g", thr), collapse = ", "), ll, elapsed))
}
con <- file(args[3], "w")
cat("{", paste(out, collapse = ",\n"), "}\n", file = con)
close(con)
