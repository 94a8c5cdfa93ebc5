//! SVG charts (plotters, SVG backend only): grouped bars with min–max whiskers, and
//! lines over time.

use crate::error::{BenchError, BenchResultT};
use plotters::prelude::*;
use std::path::Path;

/// One bar: the median and the range over rounds.
#[derive(Clone, Copy, Debug)]
pub struct Bar {
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

/// A group of bars (one per series; `None` where a series has no value).
#[derive(Clone, Debug)]
pub struct Group {
    pub label: String,
    pub bars: Vec<Option<Bar>>,
}

const COLORS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];

fn plot_err(path: &Path, e: impl std::fmt::Display) -> BenchError {
    BenchError::msg(format!("{}: cannot draw the chart: {e}", path.display()))
}

type Chart<'a> = ChartContext<
    'a,
    SVGBackend<'a>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Draws the legend of `chart` and writes the SVG out.
fn legend_and_present(
    chart: &mut Chart<'_>,
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    path: &Path,
) -> BenchResultT<()> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| plot_err(path, e))?;
    root.present().map_err(|e| plot_err(path, e))?;
    Ok(())
}

/// Writes a grouped bar chart to `path` (SVG). `series` names the bars of each group
/// in order (the legend).
pub fn grouped_bars(
    path: &Path,
    title: &str,
    y_label: &str,
    series: &[String],
    groups: &[Group],
) -> BenchResultT<()> {
    draw_bars(path, title, y_label, series, groups, None)
}

/// A mark drawn across each group of a bar chart at a value of its own (e.g. where a
/// paper's factor over the baseline would put the bar), named in the legend.
#[derive(Clone, Debug)]
pub struct Reference {
    pub name: String,
    /// One value per group (`None`: no mark over that group).
    pub values: Vec<Option<f64>>,
}

/// [`grouped_bars`] with a dashed reference mark over each group, and room above the
/// bars for the legend (a paper's figure beside ours: `mnemofs bench paper`).
pub fn bars_with_reference(
    path: &Path,
    title: &str,
    y_label: &str,
    series: &[String],
    groups: &[Group],
    reference: &Reference,
) -> BenchResultT<()> {
    draw_bars(path, title, y_label, series, groups, Some(reference))
}

fn draw_bars(
    path: &Path,
    title: &str,
    y_label: &str,
    series: &[String],
    groups: &[Group],
    reference: Option<&Reference>,
) -> BenchResultT<()> {
    let marks = reference.map_or(&[][..], |r| r.values.as_slice());
    let ymax = groups
        .iter()
        .flat_map(|g| g.bars.iter().flatten())
        .map(|b| b.high.max(b.value))
        .chain(marks.iter().flatten().copied())
        .fold(0.0f64, f64::max);
    // With a reference the legend has a line more; keep it clear of the bars.
    let headroom = if reference.is_some() { 1.45 } else { 1.15 };
    let ymax = if ymax > 0.0 { ymax * headroom } else { 1.0 };
    let n = groups.len().max(1);
    let k = series.len().max(1);
    let width = (160 + 60 * n * k).clamp(640, 1600) as u32;
    let root = SVGBackend::new(path, (width, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
    let labels: Vec<String> = groups.iter().map(|g| g.label.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(72)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax)
        .map_err(|e| plot_err(path, e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(RGBColor(0xee, 0xee, 0xee))
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            let c = x - 0.5;
            let i = c.round();
            if (c - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_desc(y_label)
        .y_label_formatter(&|y| crate::result::si(*y))
        .draw()
        .map_err(|e| plot_err(path, e))?;
    let slot = 0.8 / k as f64;
    for (si, name) in series.iter().enumerate() {
        let color = COLORS[si % COLORS.len()];
        let mut rects = Vec::new();
        let mut whiskers = Vec::new();
        for (gi, g) in groups.iter().enumerate() {
            if let Some(Some(b)) = g.bars.get(si) {
                let x0 = gi as f64 + 0.1 + si as f64 * slot;
                let x1 = x0 + slot * 0.9;
                rects.push(Rectangle::new([(x0, 0.0), (x1, b.value)], color.filled()));
                let xm = (x0 + x1) / 2.0;
                whiskers.push(PathElement::new(vec![(xm, b.low), (xm, b.high)], BLACK));
                let w = slot * 0.2;
                whiskers.push(PathElement::new(
                    vec![(xm - w, b.low), (xm + w, b.low)],
                    BLACK,
                ));
                whiskers.push(PathElement::new(
                    vec![(xm - w, b.high), (xm + w, b.high)],
                    BLACK,
                ));
            }
        }
        chart
            .draw_series(rects)
            .map_err(|e| plot_err(path, e))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        chart.draw_series(whiskers).map_err(|e| plot_err(path, e))?;
    }
    if let Some(r) = reference {
        let style = ShapeStyle::from(&BLACK).stroke_width(2);
        let segments: Vec<PathElement<(f64, f64)>> = r
            .values
            .iter()
            .enumerate()
            .filter_map(|(gi, v)| v.map(|v| (gi, v)))
            .flat_map(|(gi, v)| {
                // Dashes across the group's bars.
                let (x0, x1) = (gi as f64 + 0.05, gi as f64 + 0.95);
                let n = 12;
                (0..n).step_by(2).map(move |k| {
                    let a = x0 + (x1 - x0) * k as f64 / n as f64;
                    let b = x0 + (x1 - x0) * (k + 1) as f64 / n as f64;
                    PathElement::new(vec![(a, v), (b, v)], style)
                })
            })
            .collect();
        chart
            .draw_series(segments)
            .map_err(|e| plot_err(path, e))?
            .label(r.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], style));
    }
    legend_and_present(&mut chart, &root, path)
}

/// One line of a chart over time: its name and its points `(x, y)` in x order.
#[derive(Clone, Debug)]
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Writes a line chart to `path` (SVG): every line over a shared x axis (time),
/// drawn as steps (a value holds until the next point).
pub fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
) -> BenchResultT<()> {
    draw_lines(path, title, x_label, y_label, lines, LineStyle::Steps)
}

/// Writes a line chart to `path` (SVG): every line through its points, each point
/// marked (a scaling curve: ops/s against threads).
pub fn curves(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
) -> BenchResultT<()> {
    draw_lines(path, title, x_label, y_label, lines, LineStyle::Curves)
}

/// [`curves`] over thread counts: ticks at whole numbers only (1, 2, 4, ...), and
/// values as `1.25M` (a paper's scaling figure beside ours: `mnemofs bench paper`).
pub fn thread_curves(path: &Path, title: &str, y_label: &str, lines: &[Line]) -> BenchResultT<()> {
    draw_lines(path, title, "threads", y_label, lines, LineStyle::Threads)
}

/// How [`draw_lines`] draws.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LineStyle {
    /// A value holds until the next point.
    Steps,
    /// Straight through the points, each marked.
    Curves,
    /// `Curves` over whole numbers, values with SI suffixes.
    Threads,
}

fn draw_lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
    style: LineStyle,
) -> BenchResultT<()> {
    let as_steps = style == LineStyle::Steps;
    let pts = || lines.iter().flat_map(|l| l.points.iter());
    let xmax = pts().map(|p| p.0).fold(0.0f64, f64::max).max(1e-9);
    let xmin = pts().map(|p| p.0).fold(xmax, f64::min);
    let ymax = pts().map(|p| p.1).fold(0.0f64, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.1 } else { 1.0 };
    let threads = style == LineStyle::Threads;
    // Over thread counts: half a thread of margin each side, and room above the
    // lines for the legend.
    let (xmin, xmax, ymax) = if threads {
        (xmin - 0.5, xmax + 0.5, ymax * 1.25)
    } else {
        (xmin, xmax, ymax)
    };
    let root = SVGBackend::new(path, (960, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(if threads { 72 } else { 56 })
        .build_cartesian_2d(xmin..xmax, 0f64..ymax)
        .map_err(|e| plot_err(path, e))?;
    let whole = |x: &f64| {
        if (x - x.round()).abs() < 1e-6 && *x >= 0.5 {
            format!("{}", x.round() as u64)
        } else {
            String::new()
        }
    };
    let mut mesh = chart.configure_mesh();
    mesh.light_line_style(RGBColor(0xee, 0xee, 0xee))
        .x_desc(x_label)
        .y_desc(y_label);
    if threads {
        // One tick per whole number (the axis spans at most a few hundred).
        let span = (xmax - xmin).ceil().clamp(1.0, 400.0) as usize;
        mesh.x_labels(span * 4 + 1)
            .x_label_formatter(&whole)
            .y_label_formatter(&|y| crate::result::si(*y));
    }
    mesh.draw().map_err(|e| plot_err(path, e))?;
    for (i, l) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut steps = Vec::with_capacity(l.points.len() * 2);
        if as_steps {
            for w in l.points.windows(2) {
                steps.push(w[0]);
                steps.push((w[1].0, w[0].1));
            }
            if let Some(&last) = l.points.last() {
                steps.push(last);
            }
        } else {
            steps.extend_from_slice(&l.points);
            chart
                .draw_series(l.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| plot_err(path, e))?;
        }
        chart
            .draw_series(LineSeries::new(steps, color.stroke_width(1)))
            .map_err(|e| plot_err(path, e))?
            .label(l.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], color));
    }
    legend_and_present(&mut chart, &root, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_an_svg_with_every_series() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.svg");
        let b = |v| {
            Some(Bar {
                value: v,
                low: v * 0.9,
                high: v * 1.1,
            })
        };
        grouped_bars(
            &p,
            "randwrite",
            "ops/s",
            &["nova/dram".into(), "nova/optane".into()],
            &[
                Group {
                    label: "1 thread".into(),
                    bars: vec![b(1000.0), b(500.0)],
                },
                Group {
                    label: "2 threads".into(),
                    bars: vec![b(1800.0), None],
                },
            ],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
        for s in [
            "randwrite",
            "nova/dram",
            "nova/optane",
            "1 thread",
            "2 threads",
        ] {
            assert!(svg.contains(s), "{s} missing");
        }
    }

    #[test]
    fn draws_bars_with_a_reference_mark_and_thread_curves() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.svg");
        let b = |v| {
            Some(Bar {
                value: v,
                low: v,
                high: v,
            })
        };
        bars_with_reference(
            &p,
            "headline",
            "B/s",
            &["base".into(), "ours".into()],
            &[Group {
                label: "128 B".into(),
                bars: vec![b(1.0), b(2.5)],
            }],
            &Reference {
                name: "paper: 2.6x base".into(),
                values: vec![Some(2.6)],
            },
        )
        .unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        for s in ["headline", "base", "ours", "128 B", "paper: 2.6x base"] {
            assert!(svg.contains(s), "{s} missing");
        }
        let p = dir.path().join("t.svg");
        thread_curves(
            &p,
            "dwom",
            "ops/s",
            &[Line {
                name: "nova".into(),
                points: vec![(1.0, 1.5e6), (2.0, 2.5e6), (4.0, 2.0e6)],
            }],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        // (plotters writes a label's text on a line of its own)
        for s in ["dwom", "nova", "\n1.00M\n", "\n2.00M\n", "\n4\n"] {
            assert!(svg.contains(s), "{s:?} missing: {svg}");
        }
        // Whole thread counts only on the x axis.
        assert!(
            !svg.contains("\n1.5\n") && !svg.contains("\n0.5\n"),
            "{svg}"
        );
    }

    #[test]
    fn draws_lines_over_time_with_their_names() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.svg");
        lines(
            &p,
            "commit queue",
            "s",
            "count",
            &[
                Line {
                    name: "queue length".into(),
                    points: vec![(0.0, 1.0), (0.5, 7.0), (1.0, 2.0)],
                },
                Line {
                    name: "commit threads".into(),
                    points: vec![(0.0, 1.0), (1.0, 1.0)],
                },
            ],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.starts_with("<svg"));
        for s in ["commit queue", "queue length", "commit threads"] {
            assert!(svg.contains(s), "{s} missing");
        }
        // Two lines drawn as polylines.
        assert!(svg.matches("<polyline").count() >= 2, "{svg}");
    }
}
