extern "C" void launch_cost_run(const char* cubin_path);
int main(int argc, char** argv) { launch_cost_run(argc > 1 ? argv[1] : "tiny.cubin"); }
