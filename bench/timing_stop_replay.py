#!/usr/bin/env python3
"""When would the timing loop have stopped, with the exact and with the interpolated interval?

Evaluates each kernel with BUILD (an exact-interval build, so that its loop runs at least until
the exact rule stops; a 4 s budget) and replays the judge's stopping rule (checked at n >= 20
rounds, every 5; 95% interval half-width <= 3%) on the same rounds with both intervals
(tpu_runner/timing_stats.cc): one machine state, two rules (docs/benchmarks.md).

  python3 bench/timing_stop_replay.py OLD_BUILD 5 cpu/softmax_rows=tests/honest/softmax_rows_avx2/kernel.cpp
"""
import json, subprocess, sys, os, math
def pmf(n, i): return math.exp(math.lgamma(n+1)-math.lgamma(i+1)-math.lgamma(n-i+1)-n*math.log(2))
def lower(n):
    c=0; k=-1
    for i in range(n//2+1):
        p=pmf(n,i)
        if c+p>0.025: break
        c+=p; k=i
    return k,c
def med(s):
    n=len(s); return (s[(n-1)//2]+s[n//2])/2
def exact(x):
    s=sorted(x); n=len(s); k,_=lower(n); m=med(s); return max(m/s[k], s[n-1-k]/m)-1
def interp(x):
    s=sorted(x); n=len(s); k,c=lower(n); d=k+1; m=med(s)
    gd=1-2*c; gn=1-2*(c+pmf(n,d)); lo,hi=s[k],s[n-1-k]
    if d<n-d and gd>gn:
        I=(gd-0.95)/(gd-gn); lam=(n-d)*I/(d+(n-2*d)*I)
        lo=lam*s[k+1]+(1-lam)*s[k]; hi=lam*s[n-2-k]+(1-lam)*s[n-1-k]
    return max(m/lo, hi/m)-1
def stop(r, f):
    for n in range(20, len(r)+1, 5):
        if f(r[:n]) <= 0.03: return n
    return None
build = sys.argv[1]; reps = int(sys.argv[2])
env = dict(os.environ, KERNELGYM_TOOLS_DIR=os.path.abspath(build) + "/tpu_runner")
for case in sys.argv[3:]:
    task, src = case.split("=")
    rows=[]
    for i in range(reps):
        out = subprocess.run([build + "/cli/kernelgym", "eval", "--task", task, "--source", src, "--json", "--samples", "--timing-budget-s", "4"], capture_output=True, text=True, env=env)
        r = json.loads(out.stdout); sm = r["timing"].get("samples") or []
        ratios = [s["reference_ns"]/s["candidate_ns"] for s in sm if s.get("candidate_ns")]
        a, b = stop(ratios, exact), stop(ratios, interp)
        wa = exact(ratios[:a]) if a else exact(ratios); wb = interp(ratios[:a]) if a else interp(ratios)
        rows.append((len(ratios), a, b, wa, wb))
        print(task, "rounds", len(ratios), "stop exact", a, "stop interp", b, "width at same n: exact %.4f interp %.4f" % (wa, wb), flush=True)
    print("##", task, "load %.1f" % os.getloadavg()[0], flush=True)
