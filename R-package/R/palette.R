# One qualitative palette for every plot of the package: Okabe and Ito's eight colours
# (distinguishable with the common colour-vision deficiencies; their black taken out for
# a grey) and two more that stay apart from them, so that ten classes get ten colours;
# recycled beyond ten.
gpuml_palette <- function(n) {
  if (!is.numeric(n) || length(n) != 1L || is.na(n) || n < 0)
    stop("n must be a single number >= 0", call. = FALSE)
  base <- c("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00",
            "#CC79A7", "#7F7F7F", "#8C564B", "#17BECF")
  rep_len(base, n)
}

# A legend to the right of the plotting region, outside the points: the right margin is
# widened for it before the plot is drawn (plot_with_legend_margin) and restored after.
legend_margin <- function(labels, cex = 0.8) {
  width <- max(graphics::strwidth(labels, units = "inches", cex = cex), 0) + 0.45
  old <- graphics::par("mai")
  graphics::par(mai = c(old[1:3], max(old[4], width + 0.2)))
  old
}

legend_outside <- function(labels, col, pch, cex = 0.8) {
  usr <- graphics::par("usr")
  graphics::legend(x = usr[2], y = usr[4], legend = labels, col = col, pch = pch, cex = cex,
                   xpd = NA, bty = "n", xjust = 0, yjust = 1, inset = 0)
}
