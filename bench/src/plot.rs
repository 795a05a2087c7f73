//! The plots of BENCHMARKS.md (SVG, `plotters`): compile time vs run time per backend for
//! the counting loop, and compile time vs trace length per backend (copy-and-patch, LLVM and
//! the Cranelift variants); both log–log.

use crate::results::Results;
use plotters::prelude::*;
use std::path::Path;

/// Every backend label ([`crate::results::PeerRow::label`]) with its colour.
const BACKENDS: [(&str, RGBColor); 7] = [
    ("copy-and-patch", RGBColor(0x1b, 0x9e, 0x77)),
    ("LLVM -O0", RGBColor(0xd9, 0x5f, 0x02)),
    ("LLVM -O2", RGBColor(0x75, 0x70, 0xb3)),
    ("cranelift-mem (none)", RGBColor(0xe7, 0x29, 0x8a)),
    ("cranelift-mem (speed)", RGBColor(0x66, 0xa6, 0x1e)),
    ("cranelift-ssa (none)", RGBColor(0xe6, 0xab, 0x02)),
    ("cranelift-ssa (speed)", RGBColor(0xa6, 0x76, 0x1d)),
];

/// Writes every plot the results allow into `dir`; returns (file name, caption) pairs.
pub fn write_all(r: &Results, dir: &Path) -> Result<Vec<(String, String)>, String> {
    let mut written = Vec::new();
    // The counting loop's rows (the examples' rows have run times per program, not per round).
    let loops: Vec<_> = r
        .peer
        .iter()
        .filter(|p| p.trace.starts_with("counting loop") && p.run.is_some())
        .filter(|p| p.compile.is_some())
        .collect();
    if !loops.is_empty() {
        let file = "compile-vs-run.svg";
        let points: Vec<(String, RGBColor, f64, f64)> = loops
            .iter()
            .map(|p| {
                let colour = colour(&p.label());
                let run = p.run.as_ref().expect("filtered").median_ns;
                let compile = p.compile.as_ref().expect("filtered").median_ns;
                (p.label(), colour, compile / 1e3, run)
            })
            .collect();
        compile_vs_run(&dir.join(file), &loops[0].trace, &points)
            .map_err(|e| format!("{file}: {e}"))?;
        written.push((
            file.to_string(),
            format!(
                "Compile time vs run time of the {} (log–log; lower left is better)",
                loops[0].trace
            ),
        ));
    }
    let straight: Vec<_> = r
        .peer
        .iter()
        .filter(|p| p.trace.starts_with("straight-") && p.compile.is_some())
        .collect();
    if !straight.is_empty() {
        let file = "compile-time-by-length.svg";
        compile_by_length(&dir.join(file), &straight).map_err(|e| format!("{file}: {e}"))?;
        written.push((
            file.to_string(),
            "Compile time vs trace length (10 → 10,000 instances) per backend (log–log)"
                .to_string(),
        ));
    }
    Ok(written)
}

fn colour(backend: &str) -> RGBColor {
    BACKENDS
        .iter()
        .find(|(b, _)| *b == backend)
        .map_or(BLACK, |(_, c)| *c)
}

/// Log axis bounds around `values` (a factor of 3 of slack each side).
fn bounds(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    (lo / 3.0).max(1e-3)..(hi * 3.0)
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// A log–log chart on an SVG drawing area.
type LogLog<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<LogCoord<f64>, LogCoord<f64>>>;

/// Draws a 720×480 log–log chart into `path`: `axes` are each axis's range and
/// description, `draw` adds the series, and their legend goes at `legend`.
fn log_log(
    path: &Path,
    caption: &str,
    axes: [(std::ops::Range<f64>, &str); 2],
    legend: SeriesLabelPosition,
    draw: impl FnOnce(&mut LogLog<'_, '_>) -> DrawResult,
) -> DrawResult {
    let root = SVGBackend::new(path, (720, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let [(x, x_desc), (y, y_desc)] = axes;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x.log_scale(), y.log_scale())?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()?;
    draw(&mut chart)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(legend)
        .draw()?;
    root.present()?;
    Ok(())
}

/// A backend's mark in the legend.
fn legend_dot(colour: RGBColor) -> impl Fn((i32, i32)) -> Circle<(i32, i32), i32> {
    move |(px, py)| Circle::new((px + 8, py), 5, colour.filled())
}

fn compile_vs_run(path: &Path, title: &str, points: &[(String, RGBColor, f64, f64)]) -> DrawResult {
    let x = bounds(points.iter().map(|p| p.2));
    let y = bounds(points.iter().map(|p| p.3));
    let axes = [
        (x, "compile time (µs, log)"),
        (y, "run time per round (ns, log)"),
    ];
    log_log(
        path,
        title,
        axes,
        SeriesLabelPosition::UpperRight,
        |chart| {
            for (name, colour, cx, cy) in points {
                chart
                    .draw_series(std::iter::once(Circle::new((*cx, *cy), 7, colour.filled())))?
                    .label(name.as_str())
                    .legend(legend_dot(*colour));
            }
            Ok(())
        },
    )
}

fn compile_by_length(path: &Path, rows: &[&crate::results::PeerRow]) -> DrawResult {
    let x = bounds(rows.iter().map(|p| p.instances as f64));
    let y = bounds(
        rows.iter()
            .filter_map(|p| Some(p.compile.as_ref()?.median_ns / 1e3)),
    );
    let axes = [
        (x, "stencil instances in the trace (log)"),
        (y, "compile time (µs, log)"),
    ];
    let caption = "Compile time by trace length";
    log_log(
        path,
        caption,
        axes,
        SeriesLabelPosition::UpperLeft,
        |chart| {
            for (backend, colour) in BACKENDS {
                if !rows.iter().any(|p| p.label() == backend) {
                    continue;
                }
                let mut pts: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|p| p.label() == backend)
                    .filter_map(|p| Some((p.instances as f64, p.compile.as_ref()?.median_ns / 1e3)))
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                chart.draw_series(LineSeries::new(pts.clone(), colour.stroke_width(2)))?;
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 4, colour.filled())))?
                    .label(backend)
                    .legend(legend_dot(colour));
            }
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed plots are what this module draws from the committed figures, so a
    /// change to the drawing shows in the plots it changes (`cpjit-bench --render` redraws
    /// them).
    #[test]
    fn the_committed_plots_are_drawn_from_the_committed_figures() {
        let report = Path::new(env!("CARGO_MANIFEST_DIR")).join("report");
        let text = std::fs::read_to_string(report.join("results.json")).unwrap();
        let r: Results = serde_json::from_str(&text).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let written = write_all(&r, dir.path()).unwrap();
        assert_eq!(written.len(), 2, "{written:?}");
        for (file, _) in written {
            let drawn = std::fs::read_to_string(dir.path().join(&file)).unwrap();
            let committed = std::fs::read_to_string(report.join(&file)).unwrap();
            assert!(
                drawn == committed,
                "bench/report/{file} differs from what plot.rs draws from results.json: \
                 run `cpjit-bench --render` and commit the plots"
            );
        }
    }
}
