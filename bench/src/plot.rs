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

fn compile_vs_run(path: &Path, title: &str, points: &[(String, RGBColor, f64, f64)]) -> DrawResult {
    let root = SVGBackend::new(path, (720, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let x = bounds(points.iter().map(|p| p.2));
    let y = bounds(points.iter().map(|p| p.3));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x.log_scale(), y.log_scale())?;
    chart
        .configure_mesh()
        .x_desc("compile time (µs, log)")
        .y_desc("run time per round (ns, log)")
        .draw()?;
    for (name, colour, cx, cy) in points {
        chart
            .draw_series(std::iter::once(Circle::new((*cx, *cy), 7, colour.filled())))?
            .label(name.as_str())
            .legend(move |(px, py)| Circle::new((px + 8, py), 5, colour.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}

fn compile_by_length(path: &Path, rows: &[&crate::results::PeerRow]) -> DrawResult {
    let root = SVGBackend::new(path, (720, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let x = bounds(rows.iter().map(|p| p.instances as f64));
    let y = bounds(
        rows.iter()
            .filter_map(|p| Some(p.compile.as_ref()?.median_ns / 1e3)),
    );
    let mut chart = ChartBuilder::on(&root)
        .caption("Compile time by trace length", ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x.log_scale(), y.log_scale())?;
    chart
        .configure_mesh()
        .x_desc("stencil instances in the trace (log)")
        .y_desc("compile time (µs, log)")
        .draw()?;
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
            .legend(move |(px, py)| Circle::new((px + 8, py), 5, colour.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}
