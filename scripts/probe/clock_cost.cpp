// Cost of one clock read: steady_clock::now() (the vDSO), __rdtsc and __rdtscp.
//   g++ -O2 scripts/probe/clock_cost.cpp -o /tmp/clock_cost && /tmp/clock_cost
// H200 machine: steady_clock 30.4 ns, rdtsc 16.2 ns (results/h200/harness_overhead.md).
#include <chrono>
#include <cstdio>
#include <x86intrin.h>
int main(){
  using C=std::chrono::steady_clock;
  const int N=10000000; volatile long sink=0;
  auto t0=C::now(); for(int i=0;i<N;i++) sink+=C::now().time_since_epoch().count(); auto t1=C::now();
  printf("steady_clock %.1f ns\n", std::chrono::duration<double,std::nano>(t1-t0).count()/N);
  t0=C::now(); for(int i=0;i<N;i++) sink+=__rdtsc(); t1=C::now();
  printf("rdtsc %.1f ns\n", std::chrono::duration<double,std::nano>(t1-t0).count()/N);
  unsigned a; t0=C::now(); for(int i=0;i<N;i++) sink+=__rdtscp(&a); t1=C::now();
  printf("rdtscp %.1f ns\n", std::chrono::duration<double,std::nano>(t1-t0).count()/N);
}
