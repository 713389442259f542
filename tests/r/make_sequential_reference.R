# Freeze lme4's and ordinal's Markov GLMM fits of the committed sequential data sets
# (tests/test_sequential_glmm.py).
#
# Usage (from the repository root):
#   Rscript tests/r/make_sequential_reference.R tests/data/sequential_reference.csv \
#       tests/data/sequential_reference.json
#
# The CSV holds every case, one row per rating: case, response (binary|ordinal), lags (K),
# initial (model|condition|wooldridge), batch_id, batch_position, item_id, score.
# `uv run python tests/test_sequential_glmm.py` draws it with jurymeter's simulator and then
# runs this script. The lagged columns are built here, from the positions (lag k of a rating
# is the rating at position - k of the same batch; with initial "model" a lag before position
# 0 is 0 and every rating is a response), and the rows without all K lags are
# dropped before the factors are made, so the first modelled position is the reference level
# of `pos`; `init1..initK` (Wooldridge's initial-condition covariates) are each batch's first
# K ratings in position order. Fits:
#   binary:  glmer(score ~ lag1..lagK [+ init1..initK] + pos + unit + (1 | batch),
#                  family = binomial, nAGQ = 10), bobyqa with a large budget
#   ordinal: clmm(ordered(score) ~ lag1..lagK [+ init1..initK] + pos + unit + (1 | batch),
#                 link = "logit", nAGQ = 10)
# Only base R, lme4 and ordinal are used (no jsonlite).
suppressPackageStartupMessages({
  library(lme4)
  library(ordinal)
})
args <- commandArgs(trailingOnly = TRUE)
if (length(args) != 2) stop("usage: Rscript make_sequential_reference.R DATA.csv OUT.json")
all <- read.csv(args[1], colClasses = c(case = "character", response = "character",
                                        initial = "character", batch_id = "character",
                                        item_id = "character"))

quote <- function(x) paste0('"', gsub('"', '\\\\"', gsub("\\\\", "\\\\\\\\", x)), '"')
number <- function(x) sprintf("%.15g", x)
named <- function(v) paste0("{", paste0(quote(names(v)), ": ", number(v), collapse = ", "), "}")
sorted <- function(x) sort(unique(x), method = "radix")  # C-locale order, as Python's sorted()

entries <- character(0)
for (name in unique(all$case)) {
  d <- all[all$case == name, ]
  K <- d$lags[1]
  key <- paste(d$batch_id, d$batch_position)
  lag_names <- paste0("lag", seq_len(K))
  for (k in seq_len(K)) {
    lagged <- d$score[match(paste(d$batch_id, d$batch_position - k), key)]
    # "model": a lag before the batch's start is 0 (the position factor absorbs it)
    if (d$initial[1] == "model") lagged[d$batch_position - k < 0] <- 0
    d[[lag_names[k]]] <- lagged
  }
  terms <- lag_names
  if (d$initial[1] == "wooldridge") {
    o <- d[order(d$batch_id, d$batch_position), ]
    rank <- ave(o$batch_position, o$batch_id, FUN = seq_along)
    for (k in seq_len(K)) {
      first <- o[rank == k, ]
      d[[paste0("init", k)]] <- first$score[match(d$batch_id, first$batch_id)]
    }
    terms <- c(terms, paste0("init", seq_len(K)))
  }
  r <- d[complete.cases(d[, lag_names, drop = FALSE]), ]
  r$pos <- factor(r$batch_position, levels = sort(unique(r$batch_position)))
  r$unit <- factor(r$item_id, levels = sorted(r$item_id))
  r$batch <- factor(r$batch_id)
  rhs <- paste(c(terms, "pos", "unit", "(1 | batch)"), collapse = " + ")
  started <- proc.time()[["elapsed"]]
  if (d$response[1] == "binary") {
    fit <- glmer(as.formula(paste("score ~", rhs)), data = r, family = binomial, nAGQ = 10,
                 control = glmerControl(optimizer = "bobyqa",
                                        optCtrl = list(maxfun = 1e6, rhoend = 1e-9)))
    seconds <- proc.time()[["elapsed"]] - started
    coefs <- fixef(fit)
    sd <- getME(fit, "theta")[[1]]
    messages <- c(fit@optinfo$conv$lme4$messages, fit@optinfo$warnings)
    fitted <- "lme4::glmer, family binomial, nAGQ 10, optimizer bobyqa (maxfun 1e6, rhoend 1e-9)"
  } else {
    r$y <- factor(r$score, levels = sort(unique(r$score)), ordered = TRUE)
    fit <- clmm(as.formula(paste("y ~", rhs)), data = r, link = "logit", nAGQ = 10,
                control = clmm.control(method = "nlminb", gradTol = 1e-8,
                                       rel.tol = 1e-10, eval.max = 1e5, iter.max = 1e5))
    seconds <- proc.time()[["elapsed"]] - started
    coefs <- c(fit$alpha, fit$beta)
    sd <- as.numeric(fit$ST$batch)
    messages <- if (fit$optRes$convergence != 0) fit$optRes$message else character(0)
    fitted <- "ordinal::clmm, link logit, nAGQ 10, nlminb (rel.tol 1e-10), gradTol 1e-8"
  }
  entries <- c(entries, paste0(
    "    ", quote(name), ": {\n",
    "      \"response\": ", quote(d$response[1]), ",\n",
    "      \"lags\": ", K, ",\n",
    "      \"initial\": ", quote(d$initial[1]), ",\n",
    "      \"fit\": ", quote(fitted), ",\n",
    "      \"rows\": ", nrow(r), ",\n",
    "      \"batches\": ", nlevels(r$batch), ",\n",
    "      \"messages\": [", paste(vapply(as.character(unlist(messages)), quote, ""), collapse = ", "), "],\n",
    "      \"seconds\": ", number(seconds), ",\n",
    "      \"loglik\": ", number(as.numeric(logLik(fit))), ",\n",
    "      \"batch_sd\": ", number(sd), ",\n",
    "      \"coefficients\": ", named(coefs), "\n",
    "    }"
  ))
  cat(name, ": ", nrow(r), " responses fitted in ", round(seconds, 1), " s\n", sep = "")
}

out <- file(args[2], "w")
cat("{\n", file = out)
cat("  \"r_version\": ", quote(R.version.string), ",\n", sep = "", file = out)
cat("  \"lme4_version\": ", quote(as.character(packageVersion("lme4"))), ",\n", sep = "", file = out)
cat("  \"ordinal_version\": ", quote(as.character(packageVersion("ordinal"))), ",\n", sep = "", file = out)
cat("  \"cases\": {\n", paste(entries, collapse = ",\n"), "\n  }\n}\n", sep = "", file = out)
close(out)
