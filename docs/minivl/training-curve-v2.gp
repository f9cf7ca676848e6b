# The mini-VL v2 training curve: gnuplot docs/minivl/training-curve-v2.gp (run from the repository
# root) reads docs/minivl/training-curve-v2.tsv, written by `make train-minivl-v2`
# (kamera-train train --log FILE writes FILE.tsv), and draws docs/minivl/training-curve-v2.svg.
set terminal svg size 860,480 dynamic font 'sans,11' background rgb 'white'
set output 'docs/minivl/training-curve-v2.svg'
set title 'mini-VL v2 training: held-out accuracy and loss (test split, 200 clips)'
set xlabel 'optimizer step (16 clips x 9 questions each)'
set ylabel 'held-out accuracy'
set y2label 'loss'
set ytics nomirror
set y2tics
set yrange [0:1]
set grid
set key below
plot 'docs/minivl/training-curve-v2.tsv' using 1:5 with linespoints title 'accuracy, single-hop', \
     '' using 1:6 with linespoints title 'accuracy, cross-frame', \
     '' using 1:7 with linespoints title 'accuracy, two-frame', \
     '' using 1:4 axes x1y2 with lines dashtype 2 title 'held-out loss', \
     '' using 1:3 axes x1y2 with lines dashtype 3 title 'train loss (mean since last point)'
