"""`pivot report`: runs and their comparison as one self-contained HTML file (charts as SVG, drawn by matplotlib),
for a ticket or a pull request; or the throughput chart alone as PNG or SVG."""
